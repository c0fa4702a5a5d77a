package crisim

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/typednil"
)

// maxMsgSize is the kubelet's CRI message limit.
const maxMsgSize = 16 << 20

// Server serves a Runtime over real gRPC on a unix socket in a fresh
// temporary directory. Use Start: a Server it did not make (the zero value,
// or a nil *Server) serves nothing; its Endpoint is "", its Runtime is one
// New did not make (whose methods return an *ArgError) and Close returns
// nil.
type Server struct {
	rt        *Runtime
	gs        *grpc.Server
	dir       string
	endpoint  string
	serveDone chan struct{}
	serveErr  error

	closeOnce sync.Once
	closeErr  error
}

// Register registers r as the RuntimeService and ImageService of s, for
// callers that run their own grpc.Server. A nil s registers nothing.
func (r *Runtime) Register(s grpc.ServiceRegistrar) {
	if s == nil || typednil.Is(s) {
		return
	}
	if r == nil {
		r = &Runtime{} // answers every call with an *ArgError
	}
	runtimeapi.RegisterRuntimeServiceServer(s, r)
	runtimeapi.RegisterImageServiceServer(s, r)
}

// Start creates a Runtime from opts and serves it on a new unix socket; the
// caller must Close the Server (t.Cleanup(func() { srv.Close() })).
func Start(opts ...Option) (*Server, error) {
	rt, err := New(opts...)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "crisim-")
	if err != nil {
		return nil, fmt.Errorf("crisim: start: %w", err)
	}
	sock := filepath.Join(dir, "crisim.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("crisim: start: %w", err)
	}
	s := &Server{
		rt: rt,
		gs: grpc.NewServer(
			grpc.MaxRecvMsgSize(maxMsgSize),
			grpc.MaxSendMsgSize(maxMsgSize),
			grpc.WaitForHandlers(true),
		),
		dir:       dir,
		endpoint:  "unix://" + sock,
		serveDone: make(chan struct{}),
	}
	s.rt.Register(s.gs)
	go func() {
		defer close(s.serveDone)
		if err := s.gs.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.serveErr = err
		}
	}()
	return s, nil
}

// Endpoint is the CRI endpoint, "unix:///tmp/crisim-.../crisim.sock", for
// criclient.Dial, crictl or grpc.NewClient.
func (s *Server) Endpoint() string {
	if s == nil {
		return ""
	}
	return s.endpoint
}

// Runtime returns the served Runtime, to configure faults and read counters.
// A Server that Start did not make returns a zero Runtime, whose methods
// return an *ArgError saying to use New or Start.
func (s *Server) Runtime() *Runtime {
	if s == nil || s.rt == nil {
		return &Runtime{}
	}
	return s.rt
}

// Close closes the Runtime (hung and stalled calls and event streams end),
// stops the gRPC server, waits for its handlers and removes the socket
// directory. Idempotent.
func (s *Server) Close() error {
	if s == nil || s.gs == nil {
		return nil
	}
	s.closeOnce.Do(func() {
		_ = s.rt.Close()
		s.gs.Stop()
		<-s.serveDone
		s.closeErr = errors.Join(s.serveErr, os.RemoveAll(s.dir))
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("crisim: close: %w", s.closeErr)
		}
	})
	return s.closeErr
}
