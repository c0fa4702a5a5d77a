package crisim_test

import (
	"context"
	"errors"
	testclock "k8s.io/utils/clock/testing"
	"testing"

	"github.com/syncpod/syncpod/criclient/crisim"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Bad calls on an in-process Runtime are typed errors with a gRPC code, never
// a panic or a hang.
func TestMisuse(t *testing.T) {
	ctx := ctxT(t)
	var nilCtx context.Context
	tests := []struct {
		name string
		call func(r *crisim.Runtime) error
		kind error
		code codes.Code
	}{
		{"nil StartContainer request", func(r *crisim.Runtime) error {
			_, err := r.StartContainer(ctx, nil)
			return err
		}, crisim.ErrInvalidArgument, codes.InvalidArgument},
		{"nil RunPodSandbox request", func(r *crisim.Runtime) error {
			_, err := r.RunPodSandbox(ctx, nil)
			return err
		}, crisim.ErrInvalidArgument, codes.InvalidArgument},
		{"unknown container", func(r *crisim.Runtime) error {
			_, err := r.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "ghost"})
			return err
		}, crisim.ErrNotFound, codes.NotFound},
		{"nil ctx with latency", func(r *crisim.Runtime) error {
			_, err := r.Version(nilCtx, &runtimeapi.VersionRequest{})
			return err
		}, crisim.ErrInvalidArgument, codes.InvalidArgument},
		{"nil ctx", func(r *crisim.Runtime) error {
			_, err := r.ContainerStatus(nilCtx, &runtimeapi.ContainerStatusRequest{ContainerId: "ghost"})
			return err
		}, crisim.ErrInvalidArgument, codes.InvalidArgument},
		{"use after Close", func(r *crisim.Runtime) error {
			if err := r.Close(); err != nil {
				return err
			}
			_, err := r.Version(ctx, &runtimeapi.VersionRequest{})
			return err
		}, crisim.ErrClosed, codes.Unavailable},
		{"Close twice", func(r *crisim.Runtime) error {
			if err := r.Close(); err != nil {
				return err
			}
			if err := r.Close(); err != nil {
				return err
			}
			_, err := r.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			return err
		}, crisim.ErrClosed, codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRuntime(t, crisim.WithRealisticLatencies())
			t.Cleanup(func() { _ = r.Close() })
			err := tt.call(r)
			var e *crisim.Error
			if !errors.As(err, &e) || !errors.Is(err, tt.kind) || status.Code(err) != tt.code {
				t.Fatalf("err = %T %v, want a *crisim.Error of kind %v and code %v", err, err, tt.kind, tt.code)
			}
		})
	}
}

// WithVersion is what Version reports, so a client can tell runtimes apart.
func TestWithVersion(t *testing.T) {
	r := newRuntime(t, crisim.WithVersion("fakerun", "9.9.9"))
	t.Cleanup(func() { _ = r.Close() })
	v, err := r.Version(ctxT(t), &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.RuntimeName != "fakerun" || v.RuntimeVersion != "9.9.9" {
		t.Fatalf("Version = %v, want fakerun 9.9.9", v)
	}
}

// Every bad option is a *ConfigError from New and from Start, naming it.
func TestMisuseOptions(t *testing.T) {
	var nilClock *testclock.FakeClock
	for name, tt := range map[string]struct {
		opt  crisim.Option
		want string
	}{
		"nil clock":             {crisim.WithClock(nil), "crisim: WithClock: must not be nil"},
		"typed-nil clock":       {crisim.WithClock(nilClock), "crisim: WithClock: must not be nil"},
		"negative concurrency":  {crisim.WithMaxConcurrency(-1), "crisim: WithMaxConcurrency: -1 is negative"},
		"negative bandwidth":    {crisim.WithPullBandwidth(-1), "crisim: WithPullBandwidth: -1 is negative"},
		"negative downloads":    {crisim.WithMaxConcurrentDownloads(-2), "crisim: WithMaxConcurrentDownloads: -2 is negative"},
		"negative event buffer": {crisim.WithEventBuffer(-1), "crisim: WithEventBuffer: -1 is negative"},
	} {
		t.Run(name, func(t *testing.T) {
			var ce *crisim.ConfigError
			if r, err := crisim.New(tt.opt); !errors.As(err, &ce) || err.Error() != tt.want || r != nil {
				t.Fatalf("New = %v, %v, want nil and %q", r, err, tt.want)
			}
			if s, err := crisim.Start(tt.opt); !errors.As(err, &ce) || s != nil {
				t.Fatalf("Start = %v, %v, want a *ConfigError", s, err)
			}
		})
	}
	// Zero keeps its documented meaning, and a nil Option is ignored.
	r := newRuntime(t, nil, crisim.WithMaxConcurrency(0), crisim.WithPullBandwidth(0),
		crisim.WithMaxConcurrentDownloads(0), crisim.WithEventBuffer(0))
	_ = r.Close()
}
