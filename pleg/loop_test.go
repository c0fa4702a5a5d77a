package pleg

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// settle waits until the PLEG's loops are parked on the fake clock.
func settle(t *testing.T, f *fixture, p *PLEG) {
	t.Helper()
	waitFor(t, "loops parked", func() bool { return f.clock.HasWaiters() && len(p.wakeRelist) == 0 })
}

func TestRelistLoopHonoursPeriod(t *testing.T) {
	f := newFixture(t, WithRelistPeriod(time.Second))
	if err := f.p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "first relist", func() bool { return f.p.Stats().Relists == 1 })
	settle(t, f, f.p)
	f.clock.Step(500 * time.Millisecond)
	settle(t, f, f.p)
	if n := f.p.Stats().Relists; n != 1 {
		t.Fatalf("%d relists after half a period, want 1", n)
	}
	f.clock.Step(500 * time.Millisecond)
	waitFor(t, "second relist", func() bool { return f.p.Stats().Relists == 2 })
	settle(t, f, f.p)
	// A failing runtime is retried at the period, not in a hot loop.
	f.rt.InjectError("ListPodSandbox", errTest)
	f.clock.Step(time.Second)
	waitFor(t, "failed relist", func() bool { return f.p.Stats().RelistFailures == 1 })
	settle(t, f, f.p)
	if st := f.p.Stats(); st.RelistFailures != 1 || st.Relists != 2 {
		t.Errorf("stats %+v", st)
	}
}

var errTest = errTestT("injected")

type errTestT string

func (e errTestT) Error() string { return string(e) }

// In evented mode the PLEG probes every ProbePeriod and relists every
// SafetyNetPeriod; a probe that sees a sandbox the events did not report
// triggers a reconcile relist at once.
func TestEventedProbesAndSafetyNet(t *testing.T) {
	f := newFixture(t)
	src := newEventSource()
	h := &hookRuntime{Runtime: f.rt, events: src.run}
	p, err := New(h, f.cache, WithClock(f.clock))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	src.next(t)
	waitFor(t, "evented", func() bool { return p.Mode() == ModeEvented })
	settle(t, f, p)
	base := p.Stats()
	for range 59 {
		f.clock.Step(time.Second)
		settle(t, f, p)
	}
	if st := p.Stats(); st.Probes != 0 || st.Relists != base.Relists {
		t.Fatalf("calls before the probe period: %+v", st)
	}
	f.clock.Step(time.Second)
	waitFor(t, "probe", func() bool { return p.Stats().Probes == 1 })
	settle(t, f, p)

	// A sandbox appears without an event: the next probe finds it.
	f.setSandboxes(fsb{"a", "s1", ready})
	f.clock.Step(DefaultThreshold / 3)
	waitFor(t, "reconcile relist", func() bool { return p.Stats().Relists == base.Relists+1 })
	if evs := drain(p); len(evs) != 1 || evs[0] != ev("a", ContainerStarted, "s1") {
		t.Errorf("events %v", evs)
	}
	settle(t, f, p)
	// Safety net: a full relist every 300 s even when probes agree.
	relists := p.Stats().Relists
	f.clock.Step(DefaultSafetyNetPeriod)
	waitFor(t, "safety-net relist", func() bool { return p.Stats().Relists == relists+1 })
	if ok, err := p.Healthy(); !ok {
		t.Errorf("unhealthy: %v", err)
	}
}

// cri-api's fake returns from GetContainerEvents at once: the PLEG stays a
// healthy relisting PLEG and keeps retrying the stream with backoff.
func TestNoEventStreamStaysRelisting(t *testing.T) {
	f := newFixture(t)
	p, err := New(f.rt, f.cache, WithClock(f.clock), WithBackOff(time.Second, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f.rt.SetFakeContainers([]*critest.FakeContainer{{ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", State: running, Labels: map[string]string{labelPodUID: "a"}}}})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stream retried", func() bool { return p.Stats().StreamErrors >= 1 })
	waitFor(t, "relists and stream retries", func() bool {
		f.clock.Step(3 * time.Second) // past the longest jittered back-off
		st := p.Stats()
		return st.StreamErrors >= 3 && st.Relists >= 5
	})
	st := p.Stats()
	if p.Mode() != ModeRelisting || st.StreamConnects != 0 {
		t.Errorf("mode %v stats %+v", p.Mode(), st)
	}
	if ok, err := p.Healthy(); !ok {
		t.Errorf("unhealthy: %v", err)
	}
}
