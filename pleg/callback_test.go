package pleg

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncpod/syncpod/statecache"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"
)

// callIntoPLEG is what a cache subscriber may do from its callback: ask for
// a pod relist (once per pod, or the relists would never end), check health
// and read the counters.
type callIntoPLEG struct {
	p         atomic.Pointer[PLEG]
	mu        sync.Mutex
	requested map[types.UID]bool
	calls     atomic.Int64 // callbacks that returned
	sets      atomic.Int64
	deletes   atomic.Int64
	errs      chan error
}

func newCallIntoPLEG() *callIntoPLEG {
	return &callIntoPLEG{requested: map[types.UID]bool{}, errs: make(chan error, 100)}
}

func (c *callIntoPLEG) call(uid types.UID) {
	p := c.p.Load()
	c.mu.Lock()
	first := !c.requested[uid]
	c.requested[uid] = true
	c.mu.Unlock()
	if first {
		if err := p.RequestRelist(uid); err != nil {
			c.errs <- err
		}
	}
	_, _ = p.Healthy()
	_ = p.Stats()
	_ = p.Mode()
	c.calls.Add(1)
}

// stopWithin closes p, failing the test instead of hanging if Close does not
// return (the deadline only bounds a hang; it asserts no timing).
func stopWithin(t *testing.T, p *PLEG) {
	t.Helper()
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
}

// observedCache is a statecache whose Sets and Deletes call fn in the
// goroutine that made them, after the change, as a synchronous observer of
// the cache would.
type observedCache struct {
	*statecache.Cache[types.UID, *PodStatus]
	fn func(statecache.Change[types.UID, *PodStatus])
}

func (c observedCache) Set(uid types.UID, st *PodStatus, err error, ts time.Time) bool {
	ok := c.Cache.Set(uid, st, err, ts)
	if ok {
		c.fn(statecache.Change[types.UID, *PodStatus]{Key: uid, Value: st, Err: err, Modified: ts})
	}
	return ok
}

func (c observedCache) Delete(uid types.UID) {
	c.Cache.Delete(uid)
	c.fn(statecache.Change[types.UID, *PodStatus]{Key: uid, Deleted: true})
}

// A callback run inside statecache's Set and Delete may call back into the
// PLEG (RequestRelist, Healthy, Stats, Mode) from every write path (full
// relist, pod relist, runtime event, vanished pod) without deadlocking, and
// the cache is still written before the events.
func TestCacheSubscriberCallsBackIntoPLEG(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	rt.SetFakeSandboxes([]*critest.FakePodSandbox{
		{PodSandboxStatus: runtimeapi.PodSandboxStatus{Id: "s1", State: ready, CreatedAt: 1, Metadata: &runtimeapi.PodSandboxMetadata{Name: "a", Namespace: "ns", Uid: "a"}}},
		{PodSandboxStatus: runtimeapi.PodSandboxStatus{Id: "s2", State: ready, CreatedAt: 2, Metadata: &runtimeapi.PodSandboxMetadata{Name: "b", Namespace: "ns", Uid: "b"}}},
	})
	rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "s1", ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", State: running, Metadata: &runtimeapi.ContainerMetadata{Name: "c1"}}}})
	cache := statecache.New[types.UID, *PodStatus]()
	cb := newCallIntoPLEG()
	observed := observedCache{Cache: cache, fn: func(c statecache.Change[types.UID, *PodStatus]) {
		if c.Deleted {
			cb.deletes.Add(1)
		} else {
			cb.sets.Add(1)
		}
		cb.call(c.Key)
	}}
	clk := testclock.NewFakeClock(t0)
	src := newEventSource()
	h := &hookRuntime{Runtime: rt, events: src.run}
	p, err := New(h, observed, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	cb.p.Store(p)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn := src.next(t)

	// A stuck callback would hold the PLEG's lock: wait on the callback's
	// own counter first, then fail (leaving the stuck goroutines to goleak)
	// rather than hang in Stats or Close. Sets of a and b by the relist, then
	// by the pod relists the callbacks asked for.
	waitFor(t, "callbacks into the PLEG returning", func() bool { return cb.calls.Load() >= 4 })
	waitFor(t, "relist and pod relist counted", func() bool {
		st := p.Stats()
		return st.Relists >= 1 && st.PodRelists >= 1
	})
	collected := map[Event]int{}
	take := func(want Event) {
		t.Helper()
		waitFor(t, "event "+string(want.Type)+" "+want.Data, func() bool {
			for {
				select {
				case e := <-p.Watch():
					collected[e]++
				default:
					return collected[want] > 0
				}
			}
		})
	}
	take(ev("a", ContainerStarted, "c1"))
	take(ev("b", ContainerStarted, "s2"))

	// A runtime event: Set from the stream goroutine, before the event.
	setsBefore := cb.sets.Load()
	conn.events <- containerEvent(evStopped, "c1", clk.Now().Add(time.Second), sbStatus("a", "s1", ready), ctrStatus("c1", exited))
	take(ev("a", ContainerDied, "c1"))
	if cb.sets.Load() == setsBefore {
		t.Error("the event did not write the cache")
	}
	if st, _ := cache.Get("a"); st == nil || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State != exited {
		t.Errorf("cache of a when ContainerDied arrived: %+v", st)
	}

	// Pod b vanishes: Delete from the relist goroutine.
	rt.SetFakeSandboxes([]*critest.FakePodSandbox{
		{PodSandboxStatus: runtimeapi.PodSandboxStatus{Id: "s1", State: ready, CreatedAt: 1, Metadata: &runtimeapi.PodSandboxMetadata{Name: "a", Namespace: "ns", Uid: "a"}}},
	})
	rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "s1", ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", State: exited, Metadata: &runtimeapi.ContainerMetadata{Name: "c1"}}}})
	if err := p.relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	take(ev("b", ContainerRemoved, "s2"))
	if cb.deletes.Load() == 0 {
		t.Error("the vanished pod was not deleted from the cache")
	}
	if st, _ := cache.Get("b"); st != nil {
		t.Errorf("b still cached: %+v", st)
	}
	stopWithin(t, p)
	select {
	case err := <-cb.errs:
		t.Errorf("RequestRelist from the callback: %v", err)
	default:
	}
}

// reentrantCache is a Cache whose every method calls back into the PLEG,
// UpdateTime included (statecache calls no user code there, other caches
// may).
type reentrantCache struct {
	*fakeCache
	cb      *callIntoPLEG
	updates atomic.Int64
}

func (c *reentrantCache) Set(uid types.UID, st *PodStatus, err error, ts time.Time) bool {
	ok := c.fakeCache.Set(uid, st, err, ts)
	c.cb.call(uid)
	return ok
}

func (c *reentrantCache) Delete(uid types.UID) {
	c.fakeCache.Delete(uid)
	c.cb.call(uid)
}

func (c *reentrantCache) UpdateTime(ts time.Time) {
	c.fakeCache.UpdateTime(ts)
	_, _ = c.cb.p.Load().Healthy()
	_ = c.cb.p.Load().Stats()
	c.updates.Add(1)
}

var _ Cache = (*reentrantCache)(nil)

func TestCacheMethodsMayCallBackIntoPLEG(t *testing.T) {
	f := newFixture(t)
	cache := &reentrantCache{fakeCache: newFakeCache(), cb: newCallIntoPLEG()}
	p, err := New(f.rt, cache, WithClock(f.clock), WithEventStream(false))
	if err != nil {
		t.Fatal(err)
	}
	cache.cb.p.Store(p)
	f.setSandboxes(fsb{"a", "s1", ready}, fsb{"b", "s2", ready})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// As above: the callbacks' own counters first, then the PLEG's.
	waitFor(t, "callbacks into the PLEG returning", func() bool { return cache.updates.Load() >= 1 && cache.cb.calls.Load() >= 4 })
	waitFor(t, "relist and pod relist counted", func() bool {
		st := p.Stats()
		return st.Relists >= 1 && st.PodRelists >= 1
	})
	f.setSandboxes(fsb{"a", "s1", ready})
	if err := p.relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := cache.get("b"); ok {
		t.Error("vanished pod b still cached")
	}
	stopWithin(t, p)
}
