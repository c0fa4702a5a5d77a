package pleg

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func TestRelistThreeRelists(t *testing.T) {
	f := newFixture(t)
	f.setContainers(
		fc{"1234", "c1", exited}, fc{"1234", "c2", running}, fc{"1234", "c3", unknown},
		fc{"4567", "p2c1", exited},
	)
	f.relist()
	assertEvents(t, drain(f.p),
		ev("1234", ContainerDied, "c1"), ev("1234", ContainerStarted, "c2"), ev("4567", ContainerDied, "p2c1"))

	f.relist()
	assertEvents(t, drain(f.p))

	f.setContainers(
		fc{"1234", "c2", exited}, fc{"1234", "c3", running},
		fc{"4567", "p2c4", running},
	)
	f.relist()
	assertEvents(t, drain(f.p),
		ev("1234", ContainerRemoved, "c1"), ev("1234", ContainerDied, "c2"), ev("1234", ContainerStarted, "c3"),
		ev("4567", ContainerRemoved, "p2c1"), ev("4567", ContainerStarted, "p2c4"))
}

func TestRelistChangedEventsOnlyWhenAsked(t *testing.T) {
	f := newFixture(t, WithChangedEvents(true))
	f.setContainers(fc{"1234", "c3", unknown})
	f.relist()
	assertEvents(t, drain(f.p), ev("1234", ContainerChanged, "c3"))
}

// relistObserver reports finished relists.
type relistObserver struct {
	done chan RelistResult
}

func (o *relistObserver) observe(ob Observation) {
	if ob.Kind == ObservedRelist {
		o.done <- ob.Relist
	}
}

func TestEventChannelFullDropsAndResyncs(t *testing.T) {
	obs := &relistObserver{done: make(chan RelistResult, 10)}
	f := newFixture(t, WithChannelCapacity(4), WithObserver(obs.observe))
	f.setContainers(
		fc{"a", "c1", running}, fc{"a", "c2", running}, fc{"a", "c3", running}, fc{"a", "c4", running},
		fc{"b", "c5", running},
	)
	if err := f.p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-obs.done // read only once the relist has published everything
	var got []Event
	for len(got) < 5 {
		select {
		case e := <-f.p.Watch():
			got = append(got, e)
		case <-time.After(10 * time.Second):
			t.Fatalf("got only %v", got)
		}
	}
	assertEvents(t, sortEvents(got[:4]),
		ev("a", ContainerStarted, "c1"), ev("a", ContainerStarted, "c2"), ev("a", ContainerStarted, "c3"), ev("a", ContainerStarted, "c4"))
	if want := ev("b", PodSync, ""); got[4] != want {
		t.Errorf("5th event = %v, want %v (the dropped event's pod resynced)", got[4], want)
	}
	waitFor(t, "PodSync counted", func() bool { return f.p.Stats().PodSyncs == 1 })
	st := f.p.Stats()
	if st.Dropped != 1 || st.PodSyncs != 1 || st.Delivered != 5 {
		t.Errorf("stats = %+v, want 1 dropped, 1 PodSync, 5 delivered", st)
	}
	// The PodSync reader finds the dropped change in the cache.
	if s := f.cache.containerStates("b"); s["c5"] != running {
		t.Errorf("cache of b = %v, want c5 running", s)
	}
}

func TestRelistContainerDeaths(t *testing.T) {
	f := newFixture(t)
	f.setContainers(fc{"a", "c1", running}, fc{"a", "c2", exited}, fc{"b", "c3", running}, fc{"b", "c4", exited})
	f.relist()
	drain(f.p)
	// c1 (running) and c2 (exited) vanish; pod b vanishes entirely.
	f.setContainers(fc{"a", "c5", running})
	f.relist()
	assertEvents(t, drain(f.p),
		ev("a", ContainerDied, "c1"), ev("a", ContainerRemoved, "c1"),
		ev("a", ContainerRemoved, "c2"),
		ev("a", ContainerStarted, "c5"),
		ev("b", ContainerDied, "c3"), ev("b", ContainerRemoved, "c3"),
		ev("b", ContainerRemoved, "c4"))
}

func TestRelistWithCacheAndReinspection(t *testing.T) {
	f := newFixture(t)
	f.setContainers(fc{"a", "c1", running}, fc{"a", "c2", running})
	f.relist()
	assertEvents(t, drain(f.p), ev("a", ContainerStarted, "c1"), ev("a", ContainerStarted, "c2"))
	first, _ := f.cache.get("a")
	if first.err != nil || len(first.status.ContainerStatuses) != 2 || !first.ts.Equal(t0) || !first.status.Timestamp.Equal(t0) {
		t.Fatalf("cache after first relist = %+v", first)
	}

	// c1 dies but inspecting the pod fails: the error is cached, no events.
	f.setContainers(fc{"a", "c1", exited}, fc{"a", "c2", running})
	boom := errors.New("inspect boom")
	f.rt.InjectError("ContainerStatus", boom)
	f.clock.Step(time.Second)
	f.relist()
	assertEvents(t, drain(f.p))
	e, _ := f.cache.get("a")
	var ie *InspectError
	if !errors.Is(e.err, boom) || !errors.As(e.err, &ie) || ie.UID != "a" || len(e.status.ContainerStatuses) != 0 {
		t.Fatalf("cache after failed inspection = status %+v err %v, want empty status and *InspectError", e.status, e.err)
	}

	// Next relist, same containers: reinspected, events now, good cache.
	f.clock.Step(time.Second)
	f.relist()
	assertEvents(t, drain(f.p), ev("a", ContainerDied, "c1"))
	e, _ = f.cache.get("a")
	if e.err != nil || f.cache.containerStates("a")["c1"] != exited || !e.ts.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("cache after reinspection = %+v err %v", e.status, e.err)
	}

	// Unchanged again: not inspected, no duplicate events.
	calls := len(f.rt.GetCalls())
	f.clock.Step(time.Second)
	f.relist()
	assertEvents(t, drain(f.p))
	for _, c := range f.rt.GetCalls()[calls:] {
		if c == "ContainerStatus" {
			t.Errorf("unchanged pod inspected again")
		}
	}
}

func TestRelistRemovesCacheEntry(t *testing.T) {
	f := newFixture(t)
	f.setContainers(fc{"a", "c1", running}, fc{"b", "c2", running})
	f.relist()
	if _, ok := f.cache.get("b"); !ok {
		t.Fatal("b not cached")
	}
	f.setContainers(fc{"a", "c1", running})
	f.relist()
	if _, ok := f.cache.get("b"); ok {
		t.Error("vanished pod b still cached")
	}
	if _, ok := f.cache.get("a"); !ok {
		t.Error("pod a lost from cache")
	}
}

func TestRelistSandboxesDiffedLikeContainers(t *testing.T) {
	f := newFixture(t)
	f.setSandboxes(fsb{"a", "s1", ready})
	f.relist()
	assertEvents(t, drain(f.p), ev("a", ContainerStarted, "s1"))
	e, _ := f.cache.get("a")
	if len(e.status.SandboxStatuses) != 1 || e.status.Name != "pod-a" || e.status.Namespace != "ns" {
		t.Fatalf("cached status = %+v", e.status)
	}
	f.setSandboxes(fsb{"a", "s1", notrdy})
	f.relist()
	assertEvents(t, drain(f.p), ev("a", ContainerDied, "s1"))
	f.setSandboxes()
	f.relist()
	assertEvents(t, drain(f.p), ev("a", ContainerRemoved, "s1"))
	if _, ok := f.cache.get("a"); ok {
		t.Error("pod without sandboxes still cached")
	}
}

func TestRelistContainersOfSandboxBelongToItsPod(t *testing.T) {
	f := newFixture(t)
	f.setSandboxes(fsb{"a", "s1", ready})
	f.rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "s1", ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", State: running, Metadata: &runtimeapi.ContainerMetadata{Name: "c1"}}}})
	f.relist()
	assertEvents(t, drain(f.p), ev("a", ContainerStarted, "c1"), ev("a", ContainerStarted, "s1"))
}

func TestHealthOverFakeTime(t *testing.T) {
	f := newFixture(t)
	ok, err := f.p.Healthy()
	if ok || !errors.Is(err, ErrNeverSucceeded) || !strings.Contains(err.Error(), "pleg has yet to be successful") {
		t.Fatalf("at start: %v %v", ok, err)
	}
	f.clock.Step(10 * time.Minute)
	if ok, _ := f.p.Healthy(); ok {
		t.Fatal("healthy after 10 min without relist")
	}
	f.relist()
	f.clock.Step(time.Minute)
	if ok, err := f.p.Healthy(); !ok {
		t.Fatalf("unhealthy a minute after a relist: %v", err)
	}
	f.clock.Step(DefaultThreshold)
	ok, err = f.p.Healthy()
	var he *HealthError
	if ok || !errors.Is(err, ErrInactive) || !errors.As(err, &he) {
		t.Fatalf("after threshold: %v %v", ok, err)
	}
	if want := "pleg was last seen active 4m0s ago; threshold is 3m0s"; !strings.Contains(err.Error(), want) {
		t.Errorf("message %q lacks %q", err, want)
	}
	// A failing runtime keeps it unhealthy, and says why.
	f.rt.InjectError("ListPodSandbox", errors.New("runtime down"))
	if err := f.p.relist(context.Background()); err == nil {
		t.Fatal("relist succeeded against a failing runtime")
	}
	if ok, err := f.p.Healthy(); ok || !strings.Contains(err.Error(), "runtime down") {
		t.Errorf("after failed relist: %v %v", ok, err)
	}
}

func TestRelistTimestampTakenBeforeListing(t *testing.T) {
	f := newFixture(t)
	h := &hookRuntime{Runtime: f.rt}
	p, err := New(h, f.cache, WithClock(f.clock), WithEventStream(false))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h.setHook("ListContainers", func() { f.clock.Step(5 * time.Second) })
	f.setContainers(fc{"a", "c1", running})
	if err := p.relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	e, _ := f.cache.get("a")
	if !e.ts.Equal(t0) {
		t.Errorf("cache written at %v, want the relist start %v", e.ts, t0)
	}
	if g := f.cache.globalTimes(); len(g) != 1 || !g[0].Equal(t0) {
		t.Errorf("global times %v, want [%v]", g, t0)
	}
	// A failed listing does not advance the global time.
	f.rt.InjectError("ListContainers", errors.New("boom"))
	if err := p.relist(context.Background()); err == nil {
		t.Fatal("want error")
	}
	var re *RelistError
	if err := p.relist(context.Background()); err != nil && !errors.As(err, &re) {
		t.Fatal(err)
	}
	if g := f.cache.globalTimes(); len(g) != 2 {
		t.Errorf("global times %v, want one more only for the successful relist", g)
	}
}

// A container the event path learned about after a relist started is not
// removed by that relist's (older) listing.
func TestRelistDoesNotRemoveWhatItCouldNotHaveSeen(t *testing.T) {
	f := newFixture(t)
	h := &hookRuntime{Runtime: f.rt}
	p, err := New(h, f.cache, WithClock(f.clock), WithEventStream(false))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f.setSandboxes(fsb{"a", "s1", ready})
	if err := p.relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	drain(p)
	sb := sbStatus("a", "s1", ready)
	h.setHook("ListContainers", func() {
		// The list below does not have c9; its event arrives meanwhile.
		h.setHook("ListContainers", nil)
		p.handleEvent(containerEvent(evStarted, "c9", f.clock.Now(), sb, ctrStatus("c9", running)))
	})
	if err := p.relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertEvents(t, drain(p), ev("a", ContainerStarted, "c9"))
	if s := f.cache.containerStates("a"); s["c9"] != running {
		t.Errorf("cache = %v", s)
	}
}

func TestRequestRelistCoalesces(t *testing.T) {
	f := newFixture(t)
	f.setSandboxes(fsb{"a", "s1", ready})
	f.relist()
	drain(f.p)
	f.rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "s1", ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", State: running, Metadata: &runtimeapi.ContainerMetadata{Name: "c1"}}}})
	for range 100 {
		if err := f.p.RequestRelist("a"); err != nil {
			t.Fatal(err)
		}
	}
	uids := f.p.takePending()
	if len(uids) != 1 || uids[0] != "a" {
		t.Fatalf("pending = %v, want [a]", uids)
	}
	calls := len(f.rt.GetCalls())
	f.clock.Step(time.Second)
	if err := f.p.relistPods(context.Background(), uids); err != nil {
		t.Fatal(err)
	}
	assertEvents(t, drain(f.p), ev("a", ContainerStarted, "c1"))
	lists := 0
	for _, c := range f.rt.GetCalls()[calls:] {
		if c == "ListPodSandbox" {
			lists++
		}
	}
	if lists != 1 {
		t.Errorf("%d ListPodSandbox calls for 100 coalesced requests, want 1", lists)
	}
	e, _ := f.cache.get("a")
	if !e.ts.Equal(t0.Add(time.Second)) || f.cache.containerStates("a")["c1"] != running {
		t.Errorf("cache = %+v at %v", e.status, e.ts)
	}
	if got := f.cache.globalTimes(); len(got) != 1 {
		t.Errorf("pod relist advanced the global time: %v", got)
	}
	if err := f.p.RequestRelist(""); err == nil {
		t.Error("empty uid accepted")
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	f := newFixture(t)
	cases := map[string][]Option{
		"period":    {WithRelistPeriod(0)},
		"threshold": {WithThreshold(-1)},
		"probe":     {WithProbePeriod(time.Hour)},
		"capacity":  {WithChannelCapacity(-1)},
		"parallel":  {WithInspectParallelism(-1)}, // 0 is unlimited: TestMisuseInspectParallelismZeroUnlimited
		"capacity+": {WithChannelCapacity(MaxChannelCapacity + 1)},
		"backoff":   {WithBackOff(time.Second, time.Millisecond)},
		"clock":     {WithClock(nil)},
	}
	for name, opts := range cases {
		var ce *ConfigError
		if _, err := New(f.rt, f.cache, opts...); !errors.As(err, &ce) {
			t.Errorf("%s: err = %v, want *ConfigError", name, err)
		}
	}
	if _, err := New(nil, f.cache); err == nil {
		t.Error("nil runtime accepted")
	}
	if _, err := New(f.rt, nil); err == nil {
		t.Error("nil cache accepted")
	}
}

func TestStartStopLifecycle(t *testing.T) {
	f := newFixture(t)
	if err := f.p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.p.Start(context.Background()); !errors.Is(err, ErrAlreadyStarted) {
		t.Errorf("second Start: %v", err)
	}
	f.p.Close()
	f.p.Close()
	if _, ok := <-f.p.Watch(); ok {
		// drain: the first relist may have produced nothing; channel must be closed
		for range f.p.Watch() {
		}
	}
	if err := f.p.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
	if err := f.p.RequestRelist("a"); !errors.Is(err, ErrClosed) {
		t.Errorf("RequestRelist after Close: %v", err)
	}
	if ok, err := f.p.Healthy(); ok || !errors.Is(err, ErrClosed) {
		t.Errorf("Healthy after Close: %v %v", ok, err)
	}
}

// A pod relist lists containers by sandbox: it must not remove containers
// it cannot see that way (attributed by the kubelet's label only).
func TestRequestRelistKeepsContainersWithoutSandbox(t *testing.T) {
	f := newFixture(t)
	f.setContainers(fc{"a", "c1", running})
	f.relist()
	drain(f.p)
	if err := f.p.relistPods(context.Background(), []types.UID{"a"}); err != nil {
		t.Fatal(err)
	}
	assertEvents(t, drain(f.p))
	if _, ok := f.cache.get("a"); !ok {
		t.Error("pod relist deleted a pod whose containers have no sandbox")
	}
}

func TestStartRejectsNilContext(t *testing.T) {
	f := newFixture(t)
	var nilCtx context.Context
	err := f.p.Start(nilCtx)
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Method != "Start" || ae.Arg != "ctx" {
		t.Fatalf("Start(nil) = %v, want an *ArgError for ctx", err)
	}
	// Nothing was started: a proper Start still works.
	if err := f.p.Start(context.Background()); err != nil {
		t.Fatalf("Start after Start(nil): %v", err)
	}
	waitFor(t, "first relist", func() bool { return f.p.Stats().Relists == 1 })
}
