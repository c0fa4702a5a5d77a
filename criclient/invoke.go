package criclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// callExtra holds what differs between calls of invoke.
type callExtra struct {
	// addTimeout is added to the method timeout (ExecSync's command
	// timeout, StopContainer's grace period), as in the kubelet.
	addTimeout time.Duration
	// noTimeout drops the deadline (ExecSync with timeout 0).
	noTimeout bool
	// fields are logged with the call (already redacted).
	fields []zap.Field
	// scrub removes secrets from an error before it leaves the client.
	scrub func(error) error
}

// invoke runs one unary CRI call: admission, per-call timeout, observer,
// logging, error wrapping and snapshot invalidation.
func invoke[T any](c *Client, ctx context.Context, name string, x callExtra, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := c.check(ctx, name); err != nil {
		return zero, err
	}
	m := c.methods[name]

	queued := c.clock.Now()
	release, err := c.admit(ctx, m.class)
	if err != nil {
		c.logger.Debug("CRI call not admitted", zap.String("method", name), zap.Error(err))
		return zero, &CallError{Method: name, Err: err}
	}
	admitted := c.clock.Now()
	queueWait := admitted.Sub(queued)

	timeout := m.timeout
	if x.noTimeout {
		timeout = 0
	} else if timeout > 0 && x.addTimeout > 0 {
		timeout += x.addTimeout
	}
	callCtx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		callCtx, cancel = context.WithTimeout(ctx, timeout)
	}

	inFlight := m.inFlight.Add(1)
	info := Event{Kind: CallAdmitted, Method: name, Class: m.class, QueueWait: queueWait, InFlight: int(inFlight)}
	if c.observer != nil {
		c.observer(info)
	}

	res, err := fn(callCtx)
	timedOut := err != nil && timeout > 0 && ourDeadlineHit(ctx, callCtx, err)
	cancel()
	info.Latency = c.clock.Since(admitted)
	info.InFlight = int(m.inFlight.Add(-1))
	release()

	c.invalidateSnapshots(m.invalidates)
	if err != nil {
		if x.scrub != nil {
			err = x.scrub(err)
		}
		if c.closed.Load() && status.Code(err) == codes.Canceled {
			// Close cut the connection under the call.
			err = fmt.Errorf("%w: %v", ErrClosed, err)
		}
		err = &CallError{Method: name, Err: err, timedOut: timedOut}
	}
	info.Kind, info.Err = CallFinished, err
	if c.observer != nil {
		c.observer(info)
	}
	if ce := c.logger.Check(zap.DebugLevel, "CRI call"); ce != nil {
		fields := append([]zap.Field{
			zap.String("method", name),
			zap.Duration("latency", info.Latency),
			zap.Duration("queueWait", queueWait),
			zap.Stringer("code", status.Code(err)),
		}, x.fields...)
		if err != nil {
			fields = append(fields, zap.Error(err))
		}
		ce.Write(fields...)
	}
	return res, err
}

// admit waits for the class's gate. A wait is ended by Close as well as by
// ctx, so that no caller stays blocked on a closed client; a gate that
// limits nothing costs nothing extra.
func (c *Client) admit(ctx context.Context, class Class) (release func(), err error) {
	g := &c.gates[class]
	if g.slots == nil && g.bucket == nil {
		return g.acquire(ctx)
	}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.life, cancel)
	release, err = g.acquire(wctx)
	stop()
	cancel()
	if err != nil && ctx.Err() == nil && c.closed.Load() {
		err = ErrClosed
	}
	return release, err
}

// check refuses a call that cannot be made: a nil ctx, a Client Dial did
// not return, a closed Client.
func (c *Client) check(ctx context.Context, method string) error {
	switch {
	case c == nil || c.methods == nil:
		return &ArgError{Method: method, Arg: "Client", Reason: "is not connected; use Dial"}
	case ctx == nil:
		return &ArgError{Method: method, Arg: "ctx", Reason: "must not be nil"}
	case c.closed.Load():
		return &CallError{Method: method, Err: ErrClosed}
	}
	return nil
}

// invoke0 is invoke for calls that return only an error.
func invoke0(c *Client, ctx context.Context, name string, x callExtra, fn func(context.Context) error) error {
	_, err := invoke(c, ctx, name, x, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	})
	return err
}

func (c *Client) invalidateSnapshots(inv invalidation) {
	if c.sandboxes == nil {
		return
	}
	if inv&invSandboxes != 0 {
		c.sandboxes.invalidate()
	}
	if inv&invContainers != 0 {
		c.containers.invalidate()
	}
}

// ourDeadlineHit reports whether a failed call ended because of the deadline
// this client set, not the caller's. The runtime may answer DeadlineExceeded
// (its copy of the deadline fired) before the client's timer has run, so the
// deadline is compared with the wall clock (gRPC deadlines are wall-clock).
func ourDeadlineHit(parent, callCtx context.Context, err error) bool {
	if parent.Err() != nil {
		return false
	}
	if !errors.Is(callCtx.Err(), context.DeadlineExceeded) && status.Code(err) != codes.DeadlineExceeded {
		return false
	}
	ours, ok := callCtx.Deadline()
	if !ok || time.Now().Before(ours) {
		return false
	}
	theirs, ok := parent.Deadline()
	return !ok || theirs.After(ours)
}
