package pleg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// nilMapRuntime fails like a zero-value fake: every call writes to a nil
// map, and the event stream panics outright.
type nilMapRuntime struct{ calls map[string]int }

func (r *nilMapRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.calls["ListPodSandbox"]++
	return nil, nil
}

func (r *nilMapRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.calls["ListContainers"]++
	return nil, nil
}

func (r *nilMapRuntime) PodSandboxStatus(context.Context, string, bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.calls["PodSandboxStatus"]++
	return nil, nil
}

func (r *nilMapRuntime) ContainerStatus(context.Context, string, bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.calls["ContainerStatus"]++
	return nil, nil
}

func (r *nilMapRuntime) GetContainerEvents(context.Context, chan *runtimeapi.ContainerEventResponse, func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	panic("GetContainerEvents not implemented")
}

func TestMisuseNew(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	cache := newFakeCache()
	var typedNilRT *critest.FakeRuntimeService
	var typedNilCache *fakeCache
	for _, tc := range []struct {
		name   string
		rt     Runtime
		cache  Cache
		opts   []Option
		option string
	}{
		{"nil runtime", nil, cache, nil, "rt"},
		{"typed-nil runtime", typedNilRT, cache, nil, "rt"},
		{"nil cache", rt, nil, nil, "cache"},
		{"typed-nil cache", rt, typedNilCache, nil, "cache"},
		{"negative relist period", rt, cache, []Option{WithRelistPeriod(-time.Second)}, "WithRelistPeriod"},
		{"negative threshold", rt, cache, []Option{WithThreshold(-1)}, "WithThreshold"},
		{"negative safety net", rt, cache, []Option{WithSafetyNetPeriod(-1)}, "WithSafetyNetPeriod"},
		{"negative probe period", rt, cache, []Option{WithProbePeriod(-1)}, "WithProbePeriod"},
		{"negative capacity", rt, cache, []Option{WithChannelCapacity(-1)}, "WithChannelCapacity"},
		{"negative parallelism", rt, cache, []Option{WithInspectParallelism(-1)}, "WithInspectParallelism"},
		{"negative relist timeout", rt, cache, []Option{WithRelistTimeout(-1)}, "WithRelistTimeout"},
		{"negative back-off", rt, cache, []Option{WithBackOff(-1, time.Second)}, "WithBackOff"},
		{"back-off max below initial", rt, cache, []Option{WithBackOff(time.Second, time.Millisecond)}, "WithBackOff"},
		{"nil clock", rt, cache, []Option{WithClock(nil)}, "WithClock"},
		{"typed-nil clock", rt, cache, []Option{WithClock((*clocktesting.FakeClock)(nil))}, "WithClock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.rt, tc.cache, tc.opts...)
			var ce *ConfigError
			if p != nil || !errors.As(err, &ce) || ce.Option != tc.option {
				t.Fatalf("New: %v, %v; want a *ConfigError for %s", p, err, tc.option)
			}
			if want := "pleg: " + tc.option + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("message %q, want prefix %q", err, want)
			}
		})
	}
}

func TestMisuseArgs(t *testing.T) {
	f := newFixture(t)
	var nilCtx context.Context
	var ae *ArgError
	if err := f.p.Start(nilCtx); !errors.As(err, &ae) || ae.Arg != "ctx" || err.Error() != "pleg: Start: ctx must not be nil" {
		t.Errorf("Start(nil): %v", err)
	}
	if err := f.p.RequestRelist(""); !errors.As(err, &ae) || ae.Method != "RequestRelist" || ae.Arg != "uid" {
		t.Errorf(`RequestRelist(""): %v`, err)
	}
	var ce *ConfigError
	if err := f.p.RequestRelist(""); errors.As(err, &ce) {
		t.Errorf(`RequestRelist(""): %v is a *ConfigError`, err)
	}
}

func TestMisuseCloseBeforeStartTwice(t *testing.T) {
	f := newFixture(t)
	if err := f.p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := f.p.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
	if err := f.p.RequestRelist("a"); !errors.Is(err, ErrClosed) {
		t.Errorf("RequestRelist after Close: %v", err)
	}
	if _, err := f.p.Healthy(); !errors.Is(err, ErrClosed) {
		t.Errorf("Healthy after Close: %v", err)
	}
	if _, ok := <-f.p.Watch(); ok {
		t.Error("Watch open after Close")
	}
}

func TestMisusePanickingRuntime(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	var seen []Observation
	core, logs := observer.New(zap.WarnLevel)
	p, err := New(&nilMapRuntime{}, newFakeCache(), WithClock(clk), WithLogger(zap.New(core)), WithObserver(func(o Observation) { seen = append(seen, o) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a failed relist and a failed stream", func() bool {
		st := p.Stats()
		return st.RelistFailures >= 1 && st.StreamErrors >= 1
	})
	ok, err := p.Healthy()
	var he *HealthError
	if ok || !errors.As(err, &he) || !strings.Contains(he.RelistErr.Error(), "panicked") || !strings.Contains(he.StreamErr.Error(), "panicked") {
		t.Errorf("Healthy: %v, %v; want a *HealthError saying the runtime panicked", ok, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// After Close no goroutine of the PLEG calls the observer any more.
	kinds := map[ObservationKind]bool{}
	for _, o := range seen {
		kinds[o.Kind] = true
	}
	if !kinds[ObservedRelist] || !kinds[ObservedStreamError] {
		t.Errorf("observations %v, want relists and stream errors", kinds)
	}
	if logs.FilterMessage("pleg event stream failed; reconnecting").Len() == 0 {
		t.Errorf("no warning logged for the failing stream: %v", logs.All())
	}
}

// wantNotNew checks err is the *ArgError of a PLEG not made by New.
func wantNotNew(t *testing.T, method string, err error) {
	t.Helper()
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Method != method || ae.Arg != "PLEG" || !strings.Contains(err.Error(), "use New") {
		t.Errorf("%s on a PLEG not made by New: %v; want an *ArgError saying to use New", method, err)
	}
}

// A PLEG not made by New starts nothing, writes no nil map and panics
// nowhere: every method that can fail says "use New", the others answer
// zero values.
func TestMisuseZeroPLEG(t *testing.T) {
	var nilPLEG *PLEG
	for name, p := range map[string]*PLEG{"zero value": {}, "nil pointer": nilPLEG} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			wantNotNew(t, "Start", p.Start(ctx))
			ok, err := p.Healthy()
			if ok {
				t.Error("Healthy: true")
			}
			wantNotNew(t, "Healthy", err)
			wantNotNew(t, "RequestRelist", p.RequestRelist("a"))
			s, err := p.Subscribe(1)
			if s != nil {
				t.Error("Subscribe returned a subscription")
			}
			wantNotNew(t, "Subscribe", err)
			_, err = p.WaitContainerState(ctx, "a", "c1", exited)
			wantNotNew(t, "WaitContainerState", err)
			_, err = p.WaitContainerRemoved(ctx, "a", "c1")
			wantNotNew(t, "WaitContainerRemoved", err)
			if _, open := <-p.Watch(); open {
				t.Error("Watch: an event from a PLEG not made by New")
			}
			if m := p.Mode(); m != ModeRelisting {
				t.Errorf("Mode = %v", m)
			}
			if st := p.Stats(); st != (Stats{}) {
				t.Errorf("Stats = %+v", st)
			}
			for range 2 {
				if err := p.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
			wantNotNew(t, "Start", p.Start(ctx)) // still not usable: Close made nothing
		})
	}
}

// A Subscription not made by Subscribe has ended: its channel is closed
// and Err says why.
func TestMisuseZeroSubscription(t *testing.T) {
	var nilSub *Subscription
	for name, s := range map[string]*Subscription{"zero value": {}, "nil pointer": nilSub} {
		t.Run(name, func(t *testing.T) {
			if _, open := <-s.Events(); open {
				t.Error("Events: an event from a Subscription not made by Subscribe")
			}
			var ae *ArgError
			if err := s.Err(); !errors.As(err, &ae) || ae.Arg != "Subscription" || !strings.Contains(err.Error(), "use PLEG.Subscribe") {
				t.Errorf("Err = %v; want an *ArgError saying to use Subscribe", err)
			}
			for range 2 {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
		})
	}
}

func TestMisuseSubscribeBufferTooLarge(t *testing.T) {
	f := newFixture(t)
	var ae *ArgError
	if s, err := f.p.Subscribe(MaxChannelCapacity + 1); s != nil || !errors.As(err, &ae) || ae.Arg != "buffer" {
		t.Errorf("Subscribe(MaxChannelCapacity+1) = %v, %v; want an *ArgError", s, err)
	}
	s, err := f.p.Subscribe(MaxChannelCapacity)
	if err != nil {
		t.Fatalf("Subscribe(MaxChannelCapacity): %v", err)
	}
	_ = s.Close()
}

func TestMisuseWaitArgs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var nilCtx context.Context
	for _, tc := range []struct {
		name, method, arg string
		call              func() error
	}{
		{"nil ctx", "WaitContainerState", "ctx", func() error { _, err := f.p.WaitContainerState(nilCtx, "a", "c1", exited); return err }},
		{"empty uid", "WaitContainerState", "uid", func() error { _, err := f.p.WaitContainerState(ctx, "", "c1", exited); return err }},
		{"empty id", "WaitContainerState", "containerID", func() error { _, err := f.p.WaitContainerState(ctx, "a", "", exited); return err }},
		{"unknown state", "WaitContainerState", "state", func() error { _, err := f.p.WaitContainerState(ctx, "a", "c1", unknown); return err }},
		{"out-of-range state", "WaitContainerState", "state", func() error { _, err := f.p.WaitContainerState(ctx, "a", "c1", 42); return err }},
		{"removed: nil ctx", "WaitContainerRemoved", "ctx", func() error { _, err := f.p.WaitContainerRemoved(nilCtx, "a", "c1"); return err }},
		{"removed: empty id", "WaitContainerRemoved", "containerID", func() error { _, err := f.p.WaitContainerRemoved(ctx, "a", ""); return err }},
	} {
		var ae *ArgError
		if err := tc.call(); !errors.As(err, &ae) || ae.Method != tc.method || ae.Arg != tc.arg {
			t.Errorf("%s: %v; want an *ArgError for %s.%s", tc.name, err, tc.method, tc.arg)
		}
	}
	// Known ids of another pod or of a sandbox are refused, not waited on.
	f.setSandboxes(fsb{"a", "s1", ready})
	f.setContainers(fc{"b", "c1", running})
	f.relist()
	for _, tc := range []struct{ uid, id string }{{"a", "c1"}, {"a", "s1"}} {
		var ae *ArgError
		if _, err := f.p.WaitContainerState(ctx, types.UID(tc.uid), tc.id, running); !errors.As(err, &ae) || ae.Arg != "containerID" {
			t.Errorf("WaitContainerState(%s, %s): %v; want an *ArgError for containerID", tc.uid, tc.id, err)
		}
	}
	if err := f.p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.WaitContainerState(ctx, "b", "c1", exited); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitContainerState after Close: %v", err)
	}
	if _, err := f.p.WaitContainerRemoved(ctx, "b", "c1"); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitContainerRemoved after Close: %v", err)
	}
	if _, err := f.p.Subscribe(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
}

// gateRuntime holds every ContainerStatus call until n are in flight at
// once, so a relist with too low a bound on inspections never finishes.
type gateRuntime struct {
	Runtime
	n       int
	mu      sync.Mutex
	inside  int
	maxSeen int
	open    chan struct{}
}

func (g *gateRuntime) ContainerStatus(ctx context.Context, id string, v bool) (*runtimeapi.ContainerStatusResponse, error) {
	g.mu.Lock()
	g.inside++
	g.maxSeen = max(g.maxSeen, g.inside)
	if g.inside == g.n {
		close(g.open)
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inside--
		g.mu.Unlock()
	}()
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Runtime.ContainerStatus(ctx, id, v)
}

// CONTRIBUTING: a count limit of 0 means unlimited. With
// WithInspectParallelism(0) a relist inspects every changed pod at once:
// here 3×DefaultInspectParallelism pods, whose inspections each wait until
// all of them are in flight.
func TestMisuseInspectParallelismZeroUnlimited(t *testing.T) {
	const pods = 3 * DefaultInspectParallelism
	rt := critest.NewFakeRuntimeService()
	g := &gateRuntime{Runtime: rt, n: pods, open: make(chan struct{})}
	p, err := New(g, newFakeCache(), WithInspectParallelism(0), WithEventStream(false), WithClock(clocktesting.NewFakeClock(t0)),
		WithRelistTimeout(20*time.Second)) // bounds a hang if the limit were kept: the relist would fail
	if err != nil {
		t.Fatalf("New(WithInspectParallelism(0)): %v", err)
	}
	defer p.Close()
	var out []*critest.FakeContainer
	for i := range pods {
		uid := fmt.Sprintf("pod-%02d", i)
		out = append(out, &critest.FakeContainer{ContainerStatus: runtimeapi.ContainerStatus{
			Id: "c-" + uid, State: running, Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
			Labels: map[string]string{labelPodUID: uid},
		}})
	}
	rt.SetFakeContainers(out)
	if err := p.relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Inspections != pods || st.InspectionFailures != 0 {
		t.Errorf("stats %+v; want %d inspections, none failed", st, pods)
	}
	if g.maxSeen != pods {
		t.Errorf("at most %d inspections at once, want all %d", g.maxSeen, pods)
	}
}
