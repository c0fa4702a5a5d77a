package pleg

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// podWithContainer makes pod a (sandbox s1) with container c1 in state st
// known to the fixture's PLEG through a relist.
func podWithContainer(t *testing.T, f *fixture, st runtimeapi.ContainerState) {
	t.Helper()
	f.setSandboxes(fsb{"a", "s1", ready})
	f.rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "s1", ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", State: st, Metadata: &runtimeapi.ContainerMetadata{Name: "c1"}}}})
	f.relist()
	drain(f.p)
}

func TestEventUpdatesCacheWithEventTime(t *testing.T) {
	f := newFixture(t)
	podWithContainer(t, f, running)
	at := t0.Add(3 * time.Second)
	f.p.handleEvent(containerEvent(evStopped, "c1", at, sbStatus("a", "s1", ready), ctrStatus("c1", exited)))
	assertEvents(t, drain(f.p), ev("a", ContainerDied, "c1"))
	e, _ := f.cache.get("a")
	if !e.ts.Equal(at) || !e.status.Timestamp.Equal(at) || f.cache.containerStates("a")["c1"] != exited || len(e.status.SandboxStatuses) != 1 {
		t.Errorf("cache = %+v at %v, want c1 exited at %v", e.status, e.ts, at)
	}
}

func TestEventsOutOfOrder(t *testing.T) {
	f := newFixture(t)
	f.setSandboxes(fsb{"a", "s1", ready})
	f.relist()
	drain(f.p)
	sb := sbStatus("a", "s1", ready)
	t1, t2 := t0.Add(time.Second), t0.Add(2*time.Second)
	// STOPPED (t2) arrives before STARTED (t1).
	f.p.handleEvent(containerEvent(evStopped, "c1", t2, sb, ctrStatus("c1", exited)))
	f.p.handleEvent(containerEvent(evStarted, "c1", t1, sb, ctrStatus("c1", running)))
	f.p.handleEvent(containerEvent(evCreated, "c1", t0, sb, ctrStatus("c1", created)))
	assertEvents(t, drain(f.p), ev("a", ContainerDied, "c1"))
	e, _ := f.cache.get("a")
	if !e.ts.Equal(t2) || f.cache.containerStates("a")["c1"] != exited {
		t.Errorf("older events overwrote newer data: %+v at %v", e.status, e.ts)
	}
	// A duplicate STOPPED is not reported again.
	f.p.handleEvent(containerEvent(evStopped, "c1", t2, sb, ctrStatus("c1", exited)))
	assertEvents(t, drain(f.p))
}

// containerd 2.0 sent events with empty containers_statuses (#129818): the
// PLEG relists the pod instead of caching an empty status.
func TestEventWithoutContainerStatuses(t *testing.T) {
	f := newFixture(t)
	podWithContainer(t, f, running)
	before, _ := f.cache.get("a")
	f.rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "s1", ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", State: exited, Metadata: &runtimeapi.ContainerMetadata{Name: "c1"}}}})
	f.p.handleEvent(containerEvent(evStopped, "c1", t0.Add(time.Second), sbStatus("a", "s1", ready)))
	assertEvents(t, drain(f.p))
	if after, _ := f.cache.get("a"); after.status != before.status {
		t.Fatalf("event without statuses overwrote the cache: %+v", after.status)
	}
	uids := f.p.takePending()
	if len(uids) != 1 || uids[0] != "a" {
		t.Fatalf("pending = %v, want the pod relisted", uids)
	}
	f.clock.Step(2 * time.Second)
	if err := f.p.relistPods(context.Background(), uids); err != nil {
		t.Fatal(err)
	}
	assertEvents(t, drain(f.p), ev("a", ContainerDied, "c1"))
	if s := f.cache.containerStates("a"); s["c1"] != exited {
		t.Errorf("cache = %v", s)
	}
	if st := f.p.Stats(); st.IncompleteEvents != 1 {
		t.Errorf("IncompleteEvents = %d", st.IncompleteEvents)
	}
}

func TestEventWithoutSandboxStatus(t *testing.T) {
	f := newFixture(t)
	podWithContainer(t, f, running)
	f.p.handleEvent(containerEvent(evStopped, "c1", t0.Add(time.Second), nil, ctrStatus("c1", exited)))
	assertEvents(t, drain(f.p))
	if uids := f.p.takePending(); len(uids) != 1 {
		t.Errorf("known container: pending = %v, want its pod", uids)
	}
	// An unknown container without a sandbox status: full reconcile.
	want := f.p.reconWant
	f.p.handleEvent(containerEvent(evStopped, "zz", t0.Add(time.Second), nil))
	if f.p.reconWant == want {
		t.Error("unattributable event did not ask for a reconcile relist")
	}
}

func TestEventSandboxDeletedDeletesCacheEntry(t *testing.T) {
	f := newFixture(t)
	f.setSandboxes(fsb{"a", "s1", ready})
	f.relist()
	drain(f.p)
	sb := sbStatus("a", "s1", notrdy)
	f.p.handleEvent(containerEvent(evStopped, "s1", t0.Add(time.Second), sb))
	f.p.handleEvent(containerEvent(evDeleted, "s1", t0.Add(2*time.Second), sb))
	assertEvents(t, drain(f.p), ev("a", ContainerDied, "s1"), ev("a", ContainerRemoved, "s1"))
	if _, ok := f.cache.get("a"); ok {
		t.Error("cache entry kept after the sandbox was deleted")
	}
}

func TestEventAboutRemovedContainerIgnored(t *testing.T) {
	f := newFixture(t)
	podWithContainer(t, f, exited)
	f.rt.SetFakeContainers(nil)
	f.relist()
	assertEvents(t, drain(f.p), ev("a", ContainerRemoved, "c1"))
	// containerd replays queued events after a reconnect.
	f.p.handleEvent(containerEvent(evStopped, "c1", t0, sbStatus("a", "s1", ready), ctrStatus("c1", exited)))
	assertEvents(t, drain(f.p))
	if st := f.p.Stats(); st.StaleEvents != 1 {
		t.Errorf("StaleEvents = %d", st.StaleEvents)
	}
}

// containerd hands a new subscriber the events queued while nobody read
// its stream: an earlier agent's pods, of the same uids, long removed. An
// event older than a full relist that did not list its id is not applied;
// an event newer than the relist, or about an id the relist listed, is.
func TestEventOlderThanRelistAboutUnlistedIDIgnored(t *testing.T) {
	f := newFixture(t, WithEventStream(true)) // a relist notes what it listed for the events only
	f.setSandboxes(fsb{"a", "s1", ready})
	f.clock.Step(10 * time.Second)
	f.relist() // lists at t0+10s
	drain(f.p)
	before := t0.Add(5 * time.Second)
	// A removed pod's sandbox and a removed container of a listed sandbox.
	f.p.handleEvent(containerEvent(evStarted, "s0", before, sbStatus("b", "s0", ready)))
	f.p.handleEvent(containerEvent(evCreated, "old", before, sbStatus("a", "s1", ready), ctrStatus("old", created)))
	assertEvents(t, drain(f.p))
	if _, ok := f.cache.get("b"); ok {
		t.Error("an event older than the relist recorded a pod the relist did not list")
	}
	if s := f.cache.containerStates("a"); len(s) != 0 {
		t.Errorf("an event older than the relist recorded a container it did not list: %v", s)
	}
	if st := f.p.Stats(); st.StaleEvents != 2 {
		t.Errorf("StaleEvents = %d, want 2", st.StaleEvents)
	}
	// A listed id: applied even when older than the relist.
	f.p.handleEvent(containerEvent(evStopped, "s1", before, sbStatus("a", "s1", notrdy)))
	assertEvents(t, drain(f.p), ev("a", ContainerDied, "s1"))
	// A container created after the relist: applied.
	after := t0.Add(11 * time.Second)
	f.p.handleEvent(containerEvent(evStarted, "c2", after, sbStatus("a", "s1", notrdy), ctrStatus("c2", running)))
	assertEvents(t, drain(f.p), ev("a", ContainerStarted, "c2"))
	if st := f.p.Stats(); st.StaleEvents != 2 {
		t.Errorf("StaleEvents = %d, want 2", st.StaleEvents)
	}
}

// modeObserver reports mode changes.
type modeObserver struct {
	modes chan Mode
}

func (o *modeObserver) observe(ob Observation) {
	if ob.Kind == ObservedModeChange {
		o.modes <- ob.To
	}
}

func waitMode(t *testing.T, o *modeObserver, want Mode) {
	t.Helper()
	select {
	case m := <-o.modes:
		if m != want {
			t.Fatalf("mode %v, want %v", m, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no mode change to %v", want)
	}
}

// The stream is cut while a container exits: the PLEG falls back to
// relisting, reports the exit once from the relist, reconnects (stepping the
// fake clock through the backoff), reconciles and goes back to evented mode;
// the replayed STOPPED event is not reported again.
func TestEventedFallbackAndRecovery(t *testing.T) {
	f := newFixture(t)
	src := newEventSource()
	h := &hookRuntime{Runtime: f.rt, events: src.run}
	obs := &modeObserver{modes: make(chan Mode, 10)}
	p, err := New(h, f.cache, WithClock(f.clock), WithObserver(obs.observe), WithBackOff(time.Second, 4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f.setSandboxes(fsb{"a", "s1", ready})
	f.rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "s1", ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", State: running, Metadata: &runtimeapi.ContainerMetadata{Name: "c1"}}}})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn := src.next(t)
	waitMode(t, obs, ModeEvented)
	next := func() Event {
		t.Helper()
		select {
		case e := <-p.Watch():
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
			return Event{}
		}
	}
	got := map[Event]int{}
	for len(got) < 2 {
		got[next()]++
	}

	// c1 exits while the stream is cut.
	f.rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "s1", ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", State: exited, Metadata: &runtimeapi.ContainerMetadata{Name: "c1"}}}})
	conn.cut <- errCut
	waitMode(t, obs, ModeRelisting)
	got[next()]++ // the immediate reconcile relist reports Died(c1)
	if ok, err := p.Healthy(); !ok {
		t.Errorf("unhealthy while relisting works: %v", err)
	}
	// Reconnect after the backoff (on the fake clock).
	var conn2 *eventConn
	waitFor(t, "reconnect", func() bool {
		select {
		case conn2 = <-src.conns:
			return true
		default:
			f.clock.Step(time.Second)
			return false
		}
	})
	waitMode(t, obs, ModeEvented)
	if p.Mode() != ModeEvented {
		t.Errorf("Mode() = %v", p.Mode())
	}
	// The runtime replays the STOPPED event.
	conn2.events <- containerEvent(evStopped, "c1", f.clock.Now(), sbStatus("a", "s1", ready), ctrStatus("c1", exited))
	waitFor(t, "replayed event handled", func() bool { return p.Stats().RuntimeEvents == 1 })
	if err := p.relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, e := range drain(p) {
		got[e]++
	}
	want := map[Event]int{ev("a", ContainerStarted, "s1"): 1, ev("a", ContainerStarted, "c1"): 1, ev("a", ContainerDied, "c1"): 1}
	if len(got) != len(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	for e, n := range want {
		if got[e] != n {
			t.Errorf("%v reported %d times, want %d (all: %v)", e, got[e], n, got)
		}
	}
	if st := p.Stats(); st.StreamConnects != 2 || st.StreamErrors < 1 {
		t.Errorf("stats %+v", st)
	}
}

// The stream delivers nothing while the runtime stops answering: the
// probes fail and Healthy turns false after the threshold, then true once
// the runtime answers again. Over the fake clock, with a runtime that blocks.
func TestEventedStallUnhealthyThenHealthy(t *testing.T) {
	f := newFixture(t)
	src := newEventSource()
	stall := make(chan struct{})
	stalled := make(chan struct{}, 1)
	h := &hookRuntime{Runtime: f.rt, events: src.run}
	p, err := New(h, f.cache, WithClock(f.clock))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.Healthy(); !ok {
		t.Fatal(err)
	}
	h.setHook("ListPodSandbox", func() {
		stalled <- struct{}{}
		<-stall
	})
	done := make(chan error)
	go func() { done <- p.probe(context.Background()) }()
	<-stalled
	f.clock.Step(DefaultThreshold + time.Second)
	ok, err := p.Healthy()
	if ok || err == nil {
		t.Fatal("healthy while the runtime has not answered for longer than the threshold")
	}
	t.Log(err)
	h.setHook("ListPodSandbox", nil)
	close(stall)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// That probe started before the stall: still stale. The next one proves life.
	if ok, _ := p.Healthy(); ok {
		t.Error("a probe that started before the stall made it healthy")
	}
	if err := p.probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.Healthy(); !ok {
		t.Errorf("unhealthy after the runtime answered: %v", err)
	}
}

// A runtime that closes the events channel ends the stream: the event it
// sent before is handled, the PLEG counts a stream error, falls back to
// relisting, reconnects after the backoff, and Close returns. Once with a
// GetContainerEvents that returns after closing, once with one that keeps
// blocking until its context ends.
func TestRuntimeClosesEventsChannel(t *testing.T) {
	for _, returns := range []bool{true, false} {
		t.Run(map[bool]string{true: "returns", false: "blocks"}[returns], func(t *testing.T) {
			f := newFixture(t)
			var conns atomic.Int64
			h := &hookRuntime{Runtime: f.rt, events: func(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
				conns.Add(1)
				cb(nil)
				ch <- containerEvent(evStarted, "c1", t0, sbStatus("a", "s1", ready), ctrStatus("c1", running))
				close(ch)
				if returns {
					return nil
				}
				<-ctx.Done()
				return ctx.Err()
			}}
			p, err := New(h, f.cache, WithClock(f.clock), WithBackOff(time.Second, 2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Bounded waits: a spinning stream loop fails here, leaving its
			// goroutines to goleak, instead of hanging the test.
			waitFor(t, "stream end counted", func() bool { return p.Stats().StreamErrors >= 1 })
			if st := p.Stats(); st.RuntimeEvents < 1 {
				t.Errorf("the event sent before the close was not handled: %+v", st)
			}
			if p.Mode() != ModeRelisting {
				t.Errorf("mode %v after the stream ended", p.Mode())
			}
			waitFor(t, "reconnect after the backoff", func() bool {
				if conns.Load() >= 2 {
					return true
				}
				f.clock.Step(time.Second)
				return false
			})
			stopWithin(t, p)
		})
	}
}

// blockingCache holds every Set until release is closed.
type blockingCache struct {
	*fakeCache
	entered chan struct{}
	release chan struct{}
}

func (c *blockingCache) Set(uid types.UID, st *PodStatus, err error, ts time.Time) bool {
	c.entered <- struct{}{}
	<-c.release
	return c.fakeCache.Set(uid, st, err, ts)
}

// Stats.Outbox counts what is decided and not yet carried out: an event
// whose cache write is in progress is not done yet.
func TestStatsOutboxCountsUnfinishedWrites(t *testing.T) {
	f := newFixture(t)
	podWithContainer(t, f, running)
	bc := &blockingCache{fakeCache: f.cache, entered: make(chan struct{}), release: make(chan struct{})}
	p, err := New(f.rt, bc, WithClock(f.clock), WithEventStream(false))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	if got := p.Stats().Outbox; got != 0 {
		t.Fatalf("Outbox of a new PLEG = %d, want 0", got)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.handleEvent(containerEvent(evStopped, "c1", t0.Add(time.Second), sbStatus("a", "s1", ready), ctrStatus("c1", exited)))
	}()
	<-bc.entered
	if got := p.Stats(); got.Outbox == 0 || got.RuntimeEvents != 1 {
		t.Errorf("while the event's cache write runs: Outbox %d RuntimeEvents %d, want Outbox > 0 and 1 event", got.Outbox, got.RuntimeEvents)
	}
	close(bc.release)
	<-done
	if got := p.Stats().Outbox; got != 0 {
		t.Errorf("Outbox after the event was handled = %d, want 0", got)
	}
}

// A relist that listed a pod before an event about it, and commits after
// it, writes the older status over the event's (an equal time overwrites).
// The PLEG relists the pod again, and once the Cache holds the right status
// it delivers a PodSync: a watcher that read the pod on the event may have
// read the older status, and is told to read again.
func TestLaggingCacheCorrectedWithPodSync(t *testing.T) {
	f := newFixture(t)
	podWithContainer(t, f, running)
	at := t0.Add(time.Second)
	f.clock.SetTime(at)
	f.p.mu.Lock()
	obs := newObservation("a", f.p.nextSeqLocked(), true)
	f.p.mu.Unlock()
	obs.name, obs.namespace = "pod-a", "ns"
	obs.entities["s1"] = observed{kind: kindSandbox, state: sandboxState(ready)}
	obs.entities["c1"] = observed{kind: kindContainer, state: containerState(running), sandboxID: "s1"}
	stale := &PodStatus{ID: "a", Name: "pod-a", Namespace: "ns", Timestamp: at,
		SandboxStatuses:   []*runtimeapi.PodSandboxStatus{sbStatus("a", "s1", ready)},
		ContainerStatuses: []*runtimeapi.ContainerStatus{ctrStatus("c1", running)}}

	f.p.handleEvent(containerEvent(evStopped, "c1", at, sbStatus("a", "s1", ready), ctrStatus("c1", exited)))
	f.p.mu.Lock()
	f.p.publishLocked(f.p.commitInspectionLocked(inspection{obs: obs, status: stale}, at))
	f.p.mu.Unlock()
	f.p.flush()
	assertEvents(t, drain(f.p), ev("a", ContainerDied, "c1"))
	if got := f.cache.containerStates("a")["c1"]; got != running {
		t.Fatalf("setup: the stale relist did not overwrite the event's status (c1 %v)", got)
	}
	if pending := f.p.takePending(); len(pending) != 1 || pending[0] != "a" {
		t.Fatalf("pods to relist after the lag = %v, want [a]", pending)
	}

	f.rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "s1", ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", State: exited, Metadata: &runtimeapi.ContainerMetadata{Name: "c1"}}}})
	if err := f.p.relistPods(context.Background(), []types.UID{"a"}); err != nil {
		t.Fatal(err)
	}
	if got := f.cache.containerStates("a")["c1"]; got != exited {
		t.Errorf("c1 in the cache after the pod relist = %v, want exited", got)
	}
	assertEvents(t, drain(f.p), ev("a", PodSync, ""))
	if st := f.p.Stats(); st.Resyncs != 1 || st.PodSyncs != 1 {
		t.Errorf("Resyncs %d PodSyncs %d, want 1 and 1", st.Resyncs, st.PodSyncs)
	}
}
