package criclient_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient"
)

func TestMisuseDial(t *testing.T) {
	var nilCtx context.Context
	var ae *criclient.ArgError
	if _, err := criclient.Dial(nilCtx, "/x.sock"); !errors.As(err, &ae) || ae.Method != "Dial" || ae.Arg != "ctx" {
		t.Errorf("Dial(nil ctx) = %v, want *ArgError for ctx", err)
	}
	var nilClock *clock.RealClock
	for name, o := range map[string]criclient.Option{
		"typed-nil clock":         criclient.WithClock(nilClock),
		"NaN QPS":                 criclient.WithAdmission(criclient.ClassRead, criclient.Limits{QPS: math.NaN()}),
		"infinite QPS":            criclient.WithAdmission(criclient.ClassRead, criclient.Limits{QPS: math.Inf(1)}),
		"negative QPS":            criclient.WithAdmission(criclient.ClassRead, criclient.Limits{QPS: -1}),
		"negative Burst":          criclient.WithAdmission(criclient.ClassRead, criclient.Limits{QPS: 1, Burst: -1}),
		"negative MaxInFlight":    criclient.WithAdmission(criclient.ClassRead, criclient.Limits{MaxInFlight: -1}),
		"unknown class":           criclient.WithAdmission(criclient.Class(99), criclient.Limits{}),
		"zero timeout":            criclient.WithTimeout(0),
		"negative method timeout": criclient.WithMethodTimeout("Version", -time.Second),
		"unknown method":          criclient.WithMethodTimeout("NoSuchMethod", time.Second),
		"zero message size":       criclient.WithMaxMessageSize(0),
		"negative snapshot age":   criclient.WithListSnapshots(-time.Second),
	} {
		var ce *criclient.ConfigError
		if _, err := criclient.Dial(context.Background(), "/x.sock", o); !errors.As(err, &ce) {
			t.Errorf("%s: Dial = %v, want *ConfigError", name, err)
		}
	}
	_, err := criclient.Dial(context.Background(), "/x.sock", criclient.WithTimeout(-time.Second))
	if got, want := err.Error(), "criclient: WithTimeout: -1s is not positive"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	// A nil Option, a nil observer and a nil logger are nothing to refuse.
	c, err := criclient.Dial(context.Background(), startStub(t, "stub"), nil,
		criclient.WithObserver(nil), criclient.WithLogger(nil), criclient.WithListSnapshots(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMisuseZeroClient(t *testing.T) {
	ctx := context.Background()
	var zero criclient.Client
	var nilClient *criclient.Client
	for name, c := range map[string]*criclient.Client{"zero": &zero, "nil": nilClient} {
		isNotDialed := func(err error) bool {
			var ae *criclient.ArgError
			return errors.As(err, &ae) && ae.Arg == "Client"
		}
		if _, err := c.Version(ctx, "v1"); !isNotDialed(err) {
			t.Errorf("%s Client: Version = %v, want *ArgError", name, err)
		}
		if _, err := c.ListContainers(ctx, nil); !isNotDialed(err) {
			t.Errorf("%s Client: ListContainers = %v, want *ArgError", name, err)
		}
		if _, err := c.ListPodSandbox(ctx, nil); !isNotDialed(err) {
			t.Errorf("%s Client: ListPodSandbox = %v, want *ArgError", name, err)
		}
		if err := c.GetContainerEvents(ctx, make(chan *runtimeapi.ContainerEventResponse), nil); !isNotDialed(err) {
			t.Errorf("%s Client: GetContainerEvents = %v, want *ArgError", name, err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("%s Client: Close = %v", name, err)
		}
		if err := c.CRI().Close(ctx); err != nil {
			t.Errorf("%s Client: CRI().Close = %v", name, err)
		}
	}
}

func TestMisuseNilContext(t *testing.T) {
	srv := startSim(t)
	for name, c := range map[string]*criclient.Client{
		"plain":     dial(t, srv),
		"snapshots": dial(t, srv, criclient.WithListSnapshots(time.Second)),
	} {
		var nilCtx context.Context
		isCtx := func(err error) bool {
			var ae *criclient.ArgError
			return errors.As(err, &ae) && ae.Arg == "ctx" && ae.Reason == "must not be nil"
		}
		if _, err := c.Version(nilCtx, "v1"); !isCtx(err) {
			t.Errorf("%s: Version(nil) = %v", name, err)
		}
		if _, err := c.ListContainers(nilCtx, nil); !isCtx(err) {
			t.Errorf("%s: ListContainers(nil) = %v", name, err)
		}
		if _, err := c.ListPodSandbox(nilCtx, nil); !isCtx(err) {
			t.Errorf("%s: ListPodSandbox(nil) = %v", name, err)
		}
		if err := c.GetContainerEvents(nilCtx, make(chan *runtimeapi.ContainerEventResponse), nil); !isCtx(err) {
			t.Errorf("%s: GetContainerEvents(nil) = %v", name, err)
		}
	}
}

// TestMisuseCloseUnblocksAdmission: a call waiting for admission when Close
// is called returns ErrClosed instead of waiting for its own context.
func TestMisuseCloseUnblocksAdmission(t *testing.T) {
	srv := startSim(t)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	c, err := criclient.Dial(context.Background(), srv.Endpoint(), criclient.WithClock(clk),
		criclient.WithoutVersionCheck(),
		criclient.WithAdmission(criclient.ClassRead, criclient.Limits{QPS: 1, Burst: 1}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Status(ctx, false); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := c.Status(ctx, false); done <- err }()
	eventually(t, "the second call to queue", clk.HasWaiters)
	first := c.Close()
	if err := <-done; !errors.Is(err, criclient.ErrClosed) {
		t.Fatalf("blocked call after Close = %v, want ErrClosed", err)
	}
	if first != nil {
		t.Fatalf("Close = %v", first)
	}
	for range 2 {
		if err := c.Close(); err != first {
			t.Fatalf("second Close = %v, want the first result %v", err, first)
		}
	}
	if _, err := c.Version(ctx, "v1"); !errors.Is(err, criclient.ErrClosed) {
		t.Fatalf("Version after Close = %v, want ErrClosed", err)
	}
	if _, err := c.ListContainers(ctx, nil); !errors.Is(err, criclient.ErrClosed) {
		t.Fatalf("ListContainers after Close = %v, want ErrClosed", err)
	}
}

// TestMisuseCRIAdapter: CRI is the client under cri-api's interfaces; its
// Close(ctx) closes the client whatever ctx is.
func TestMisuseCRIAdapter(t *testing.T) {
	srv := startSim(t)
	c, err := criclient.Dial(context.Background(), srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	rs := c.CRI()
	if _, err := rs.Version(context.Background(), "v1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := rs.Close(ctx); err != nil {
		t.Fatalf("Close with a canceled ctx = %v", err)
	}
	if _, err := c.Version(context.Background(), "v1"); !errors.Is(err, criclient.ErrClosed) {
		t.Fatalf("Version after CRI().Close = %v, want ErrClosed", err)
	}
}

// TestMisuseGate: NewGate refuses the Limits WithAdmission refuses and a
// typed-nil clock with a *ConfigError; Acquire refuses a nil ctx and a nil
// *Gate with an *ArgError; the zero Gate admits every call; a release
// called twice gives back one slot.
func TestMisuseGate(t *testing.T) {
	for name, tt := range map[string]struct {
		l    criclient.Limits
		want string
	}{
		"negative QPS":         {criclient.Limits{QPS: -1}, "criclient: limits: QPS -1 is negative or not finite"},
		"NaN QPS":              {criclient.Limits{QPS: math.NaN()}, "criclient: limits: QPS NaN is negative or not finite"},
		"infinite QPS":         {criclient.Limits{QPS: math.Inf(1)}, "criclient: limits: QPS +Inf is negative or not finite"},
		"negative Burst":       {criclient.Limits{QPS: 1, Burst: -1}, "criclient: limits: Burst -1 is negative"},
		"negative MaxInFlight": {criclient.Limits{MaxInFlight: -3}, "criclient: limits: MaxInFlight -3 is negative"},
	} {
		g, err := criclient.NewGate(tt.l, nil)
		var ce *criclient.ConfigError
		if !errors.As(err, &ce) || ce.Option != "limits" || err.Error() != tt.want || g != nil {
			t.Errorf("%s: NewGate = %v, %v; want nil and %q", name, g, err, tt.want)
		}
		// Dial refuses the same limits, naming the class.
		_, err = criclient.Dial(context.Background(), "/x.sock", criclient.WithAdmission(criclient.ClassMutating, tt.l))
		wantDial := "criclient: WithAdmission: mutating: " + tt.want[len("criclient: limits: "):]
		if !errors.As(err, &ce) || err.Error() != wantDial {
			t.Errorf("%s: Dial = %v, want %q", name, err, wantDial)
		}
	}

	var nilClock *clocktesting.FakeClock
	g, err := criclient.NewGate(criclient.Limits{QPS: 1}, nilClock)
	var ce *criclient.ConfigError
	if !errors.As(err, &ce) || ce.Option != "clk" || g != nil {
		t.Errorf("NewGate(typed-nil clock) = %v, %v; want nil and a *ConfigError for clk", g, err)
	}

	var nilCtx context.Context
	isArg := func(err error, arg string) bool {
		var ae *criclient.ArgError
		return errors.As(err, &ae) && ae.Method == "Acquire" && ae.Arg == arg && ae.Reason == "must not be nil"
	}
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	bounded, err := criclient.NewGate(criclient.Limits{QPS: 1, Burst: 1, MaxInFlight: 1}, clk)
	if err != nil {
		t.Fatal(err)
	}
	var zero criclient.Gate
	for name, g := range map[string]*criclient.Gate{"zero": &zero, "bounded": bounded} {
		if release, err := g.Acquire(nilCtx); !isArg(err, "ctx") || release != nil {
			t.Errorf("%s Gate: Acquire(nil) = %v, want an *ArgError for ctx and no release", name, err)
		}
	}
	var nilGate *criclient.Gate
	if _, err := nilGate.Acquire(context.Background()); !isArg(err, "Gate") {
		t.Errorf("nil *Gate: Acquire = %v, want an *ArgError for Gate", err)
	}

	// The zero Gate is the Gate of the zero Limits: it admits every call at
	// once, however many are in flight.
	var releases []func()
	for range 3 {
		release, err := zero.Acquire(context.Background())
		if err != nil {
			t.Fatalf("zero Gate: Acquire = %v", err)
		}
		releases = append(releases, release)
	}
	for _, release := range releases {
		release()
		release()
	}

	// Releasing twice gives back one slot: the gate still holds at most one
	// call, so with the slot taken a canceled ctx is refused.
	release, err := bounded.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	release()
	release()
	clk.Step(time.Second) // the next token
	release, err = bounded.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := bounded.Acquire(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with the only slot held = %v, want context.Canceled", err)
	}
}
