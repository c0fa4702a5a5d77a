package crisim_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/crisim"
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
		"negative image size":   {crisim.WithImage("busybox", -1), `crisim: WithImage: size -1 is negative (image "busybox")`},
		"empty image ref":       {crisim.WithImage("", 1), "crisim: WithImage: ref must not be empty"},
		"negative registry size": {crisim.WithRegistryImage("nginx", -2),
			`crisim: WithRegistryImage: size -2 is negative (image "nginx")`},
		"empty registry ref":     {crisim.WithRegistryImage("", 0), "crisim: WithRegistryImage: ref must not be empty"},
		"negative Fixed":         {crisim.WithLatency("Version", crisim.Fixed(-time.Second)), "crisim: WithLatency: Version: Fixed(-1s): negative duration"},
		"negative Uniform min":   {crisim.WithLatency("Status", crisim.Uniform(-1, time.Second)), "crisim: WithLatency: Status: Uniform(-1ns, 1s): negative duration"},
		"negative Uniform max":   {crisim.WithLatency("Status", crisim.Uniform(time.Second, -1)), "crisim: WithLatency: Status: Uniform(1s, -1ns): negative duration"},
		"negative LogNormal":     {crisim.WithLatency("ListContainers", crisim.LogNormal(-time.Millisecond, time.Second)), "crisim: WithLatency: ListContainers: LogNormal(-1ms, 1s): negative duration"},
		"negative LogNormal p99": {crisim.WithLatency("ListContainers", crisim.LogNormal(time.Millisecond, -time.Second)), "crisim: WithLatency: ListContainers: LogNormal(1ms, -1s): negative duration"},
		"typed-nil latency":      {crisim.WithLatency("Version", crisim.LatencyFunc(nil)), "crisim: WithLatency: Version: must not be a typed nil"},
		"negative CPU work":      {crisim.WithCPU(1, map[string]time.Duration{"Version": -1}), "crisim: WithCPU: Version work -1ns is negative"},
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
	// Zero durations and sizes are accepted: no delay, an empty image.
	r = newRuntime(t, crisim.WithImage("busybox", 0), crisim.WithRegistryImage("nginx", 0),
		crisim.WithLatency("Version", crisim.Fixed(0)), crisim.WithLatency("Status", crisim.Uniform(0, 0)),
		crisim.WithLatency("ListContainers", crisim.LogNormal(0, 0)))
	defer r.Close()
	if _, err := r.Version(ctxT(t), &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
}

// A Runtime or Server that New or Start did not make never panics or
// hangs: its methods return an *ArgError saying to use New or Start, its
// counters are zero and Close returns nil.
func TestMisuseZeroValues(t *testing.T) {
	ctx := ctxT(t)
	var zeroServer crisim.Server
	var nilServer *crisim.Server
	for name, s := range map[string]*crisim.Server{"zero": &zeroServer, "nil": nilServer} {
		if ep := s.Endpoint(); ep != "" {
			t.Errorf("%s Server: Endpoint = %q, want empty", name, ep)
		}
		if _, err := s.Runtime().Version(ctx, &runtimeapi.VersionRequest{}); !isNotNew(err, "Version") {
			t.Errorf("%s Server: Runtime().Version = %v, want an *ArgError saying to use New", name, err)
		}
		for range 2 {
			if err := s.Close(); err != nil {
				t.Errorf("%s Server: Close = %v, want nil", name, err)
			}
		}
	}

	var zero crisim.Runtime
	var nilRuntime *crisim.Runtime
	for name, r := range map[string]*crisim.Runtime{"zero": &zero, "nil": nilRuntime, "of a zero Server": zeroServer.Runtime()} {
		calls := map[string]func() error{
			"Version": func() error { _, err := r.Version(ctx, &runtimeapi.VersionRequest{}); return err },
			"ListContainers": func() error {
				_, err := r.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
				return err
			},
			"RunPodSandbox": func() error {
				_, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("a")})
				return err
			},
			"PullImage": func() error {
				_, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
				return err
			},
			"GetContainerEvents":   func() error { return r.GetContainerEvents(&runtimeapi.GetEventsRequest{}, nil) },
			"FailNext":             func() error { return r.FailNext("Version", 1, nil) },
			"SetErrorRate":         func() error { return r.SetErrorRate("Version", 0.5, codes.Internal) },
			"HangNext":             func() error { return r.HangNext("Version", 1) },
			"Stall":                func() error { return r.Stall(time.Second) },
			"CutEventStreamsAfter": func() error { return r.CutEventStreamsAfter(1) },
			"DropNextEvents":       func() error { return r.DropNextEvents(1) },
			"AddImage":             func() error { return r.AddImage("busybox", 1) },
			"AddRegistryImage":     func() error { return r.AddRegistryImage("busybox", 1) },
			"ExitContainer":        func() error { return r.ExitContainer("c", 1) },
			"SetExecHandler":       func() error { return r.SetExecHandler(nil) },
			"WaitSubscribers":      func() error { return r.WaitSubscribers(ctx, 1) },
		}
		for method, call := range calls {
			err := call()
			if !isNotNew(err, method) {
				t.Errorf("%s Runtime: %s = %v, want an *ArgError saying to use New", name, method, err)
			}
		}
		// Over gRPC the refusal is codes.FailedPrecondition.
		if _, err := r.Status(ctx, &runtimeapi.StatusRequest{}); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("%s Runtime: Status code = %v, want FailedPrecondition", name, status.Code(err))
		}
		r.ResetCalls()
		bufferFull, dropped := r.EventsLost()
		if n := r.Calls("Version") + r.Downloads("busybox") + bufferFull + dropped + r.EventsSent() + int64(r.InFlight("Version")+
			r.MaxInFlight("Version")+r.Subscribers()+r.CPUBusy()) + int64(r.CPUTime()); n != 0 {
			t.Errorf("%s Runtime: counters sum to %d, want 0", name, n)
		}
		if c := r.CallCounts(); c == nil || len(c) != 0 {
			t.Errorf("%s Runtime: CallCounts = %v, want an empty map", name, c)
		}
		gs := grpc.NewServer()
		r.Register(gs) // registers a Runtime that answers every call with an *ArgError
		gs.Stop()
		for range 2 {
			if err := r.Close(); err != nil {
				t.Errorf("%s Runtime: Close = %v, want nil", name, err)
			}
		}
	}
}

func isNotNew(err error, method string) bool {
	var ae *crisim.ArgError
	return errors.As(err, &ae) && ae.Method == method && ae.Arg == "Runtime" &&
		ae.Reason == "is not initialized: use New or Start"
}

// WaitSubscribers refuses a nil ctx and a negative count.
func TestMisuseWaitSubscribers(t *testing.T) {
	r := newRuntime(t)
	defer r.Close()
	var nilCtx context.Context
	var ae *crisim.ArgError
	if err := r.WaitSubscribers(nilCtx, 1); !errors.As(err, &ae) || ae.Arg != "ctx" || err.Error() != "crisim: WaitSubscribers: ctx must not be nil" {
		t.Errorf("WaitSubscribers(nil, 1) = %v, want an *ArgError for ctx", err)
	}
	if err := r.WaitSubscribers(ctxT(t), -1); !errors.As(err, &ae) || ae.Arg != "n" {
		t.Errorf("WaitSubscribers(ctx, -1) = %v, want an *ArgError for n", err)
	}
	if err := r.WaitSubscribers(ctxT(t), 0); err != nil {
		t.Errorf("WaitSubscribers(ctx, 0) = %v, want nil", err)
	}
}

// A fault method given a negative count, duration or rate returns an
// *ArgError naming the argument and changes nothing.
func TestMisuseFaultArguments(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1_000_000, 0))
	r := newRuntime(t, crisim.WithClock(clk))
	defer r.Close()
	ctx := ctxT(t)
	boom := status.Error(codes.Internal, "boom")
	if err := r.FailNext("Version", 1, boom); err != nil {
		t.Fatal(err)
	}
	isArg := func(err error, method, arg string) bool {
		var ae *crisim.ArgError
		return errors.As(err, &ae) && ae.Method == method && ae.Arg == arg && ae.Reason != ""
	}
	for name, tt := range map[string]struct {
		err         error
		method, arg string
	}{
		"FailNext -1":         {r.FailNext("Version", -1, nil), "FailNext", "n"},
		"HangNext -1":         {r.HangNext("Status", -1), "HangNext", "n"},
		"Stall -1s":           {r.Stall(-time.Second), "Stall", "d"},
		"SetErrorRate -0.5":   {r.SetErrorRate("Status", -0.5, codes.Internal), "SetErrorRate", "rate"},
		"SetErrorRate 1.5":    {r.SetErrorRate("Status", 1.5, codes.Internal), "SetErrorRate", "rate"},
		"SetErrorRate NaN":    {r.SetErrorRate("Status", math.NaN(), codes.Internal), "SetErrorRate", "rate"},
		"DropNextEvents -1":   {r.DropNextEvents(-1), "DropNextEvents", "n"},
		"AddImage -1":         {r.AddImage("busybox", -1), "AddImage", "size"},
		"AddImage empty":      {r.AddImage("", 1), "AddImage", "ref"},
		"AddRegistryImage -1": {r.AddRegistryImage("nginx", -1), "AddRegistryImage", "size"},
	} {
		if !isArg(tt.err, tt.method, tt.arg) {
			t.Errorf("%s = %v, want an *ArgError for %s", name, tt.err, tt.arg)
		}
	}
	if got, want := r.Stall(-time.Second).Error(), "crisim: Stall: d -1s is negative"; got != want {
		t.Errorf("Stall(-1s) message %q, want %q", got, want)
	}
	// Nothing changed: the FailNext queue is intact, Status is neither hung,
	// stalled nor failing, and no image was added.
	if _, err := r.Version(ctx, &runtimeapi.VersionRequest{}); status.Code(err) != codes.Internal {
		t.Errorf("Version after FailNext(-1) = %v, want the queued Internal error", err)
	}
	for range 3 {
		if _, err := r.Status(ctx, &runtimeapi.StatusRequest{}); err != nil {
			t.Errorf("Status after refused faults = %v", err)
		}
	}
	img, err := r.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	if err != nil || img.GetImage() != nil {
		t.Errorf("ImageStatus(busybox) = %v, %v; want no image", img, err)
	}
	_, err = r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx"}})
	if status.Code(err) != codes.NotFound {
		t.Errorf("PullImage(nginx) = %v, want NotFound: the registry image was refused", err)
	}
	// Zero keeps its meaning: it clears.
	if err := r.FailNext("Version", 2, boom); err != nil {
		t.Fatal(err)
	}
	if err := r.FailNext("Version", 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Errorf("Version after FailNext(0) = %v, want the queue cleared", err)
	}
}

// The latency constructors sample within range whatever their (accepted)
// arguments: no overflow into a negative delay, no panic at the extremes.
func TestMisuseLatencyExtremes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, l := range map[string]crisim.Latency{
		"Uniform full range":  crisim.Uniform(0, math.MaxInt64),
		"Uniform swapped":     crisim.Uniform(math.MaxInt64, math.MaxInt64-1),
		"LogNormal huge p99":  crisim.LogNormal(1, math.MaxInt64),
		"LogNormal huge both": crisim.LogNormal(math.MaxInt64-1, math.MaxInt64),
	} {
		for range 1000 {
			if d := l.Sample(rng); d < 0 {
				t.Fatalf("%s: Sample = %v, want non-negative", name, d)
			}
		}
	}
	// A refused latency, sampled anyway, is no delay.
	if d := crisim.Fixed(-time.Second).Sample(rng); d != 0 {
		t.Fatalf("Fixed(-1s).Sample = %v, want 0", d)
	}
}
