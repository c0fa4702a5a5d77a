package shim

import (
	"context"
	"errors"
	"io"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/syncpod/syncpod/criclient"
)

// forward sends one unary call to the backend after admission. The
// backend's answer, including its gRPC status code and message, is returned
// untouched. Requests are never logged (they may hold credentials).
func forward[Req, Resp any](s *Shim, ctx context.Context, method string, req Req, fn func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	if s.draining() {
		var zero Resp
		return zero, status.Error(codes.Unavailable, ErrDraining.Error())
	}
	return admitAndCall(s, ctx, method, req, fn)
}

// admitAndCall is forward without the draining check, for the calls the
// shim accepted before Drain and must still complete.
func admitAndCall[Req, Resp any](s *Shim, ctx context.Context, method string, req Req, fn func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	var zero Resp
	release, err := s.admit(ctx, method)
	if err != nil {
		return zero, err
	}
	defer release()
	start := time.Now()
	resp, err := fn(ctx, req)
	s.logCall(method, start, err)
	return resp, err
}

// admit waits for method's admission gate; release frees the slot. A
// caller that gives up while its call is queued gets its context's error
// as a gRPC status, and the call is never sent.
func (s *Shim) admit(ctx context.Context, method string) (release func(), err error) {
	class, _ := criclient.MethodClass(method) // an unknown method counts as a read
	release, err = s.gates[class].Acquire(ctx)
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if ctx.Err() != nil { // the caller gave up while the call was queued
		release()
		return nil, callerGone(ctx)
	}
	return release, nil
}

// logCall logs a call the runtime answered by its method, latency and
// code: never its request, which may hold credentials.
func (s *Shim) logCall(method string, start time.Time, err error) {
	if ce := s.log.Check(zap.DebugLevel, "CRI call"); ce != nil {
		ce.Write(zap.String("method", method), zap.Duration("latency", time.Since(start)), zap.Stringer("code", status.Code(err)))
	}
}

// streamForward relays a server-streaming call from the backend.
func streamForward[Req, Resp any](s *Shim, ss grpc.ServerStreamingServer[Resp], req Req,
	open func(context.Context, Req, ...grpc.CallOption) (grpc.ServerStreamingClient[Resp], error), edit func(*Resp) *Resp) error {
	if s.draining() {
		return status.Error(codes.Unavailable, ErrDraining.Error())
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	go func() {
		select {
		case <-s.drain:
			cancel()
		case <-ctx.Done():
		}
	}()
	up, err := open(ctx, req)
	if err != nil {
		return err
	}
	for {
		m, err := up.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if edit != nil {
			m = edit(m)
		}
		if err := ss.Send(m); err != nil {
			return err
		}
	}
}
