package pleg

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
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
