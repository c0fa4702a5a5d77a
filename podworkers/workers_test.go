package podworkers_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/podworkers"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// A pod reaching a terminal phase runs the three phases in order, finishes,
// is not started again by a late update, and after Forget its UID is new.
func TestPhasesInOrderAndFinish(t *testing.T) {
	f := newFake()
	f.syncPod = func(context.Context, rec) (podworkers.Result, error) { return podworkers.Result{Terminal: true}, nil }
	var mu sync.Mutex
	var kinds []podworkers.EventKind
	w := newWorkers(t, f, podworkers.WithResyncInterval(0), podworkers.WithObserver(func(e podworkers.Event) {
		mu.Lock()
		kinds = append(kinds, e.Kind)
		mu.Unlock()
	}))
	p := pod("a")
	grace := int64(7)
	p.Spec.TerminationGracePeriodSeconds = &grace
	create(t, w, p)
	settle(t, w)
	got := f.snapshot()
	if want := []string{"SyncPod/a", "Terminating/a", "Terminated/a"}; !slices.Equal(calls(got), want) {
		t.Fatalf("calls %v, want %v", calls(got), want)
	}
	if got[0].reason != podworkers.UpdateCreate || got[1].grace != 7*time.Second {
		t.Fatalf("first call %v, termination grace %v; want Create and 7s", got[0].reason, got[1].grace)
	}
	if ph := w.Phase("a"); ph != podworkers.PhaseFinished {
		t.Fatalf("phase %v, want Finished", ph)
	}
	mu.Lock()
	want := []podworkers.EventKind{podworkers.EventCall, podworkers.EventTerminating, podworkers.EventCall, podworkers.EventCall, podworkers.EventFinished}
	if !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
	mu.Unlock()
	if err := w.Update(podworkers.PodUpdate{Type: podworkers.UpdateUpdate, Pod: p}); !errors.Is(err, podworkers.ErrFinished) {
		t.Fatalf("Update of a finished pod = %v, want ErrFinished", err)
	}
	if w.Wake("a") {
		t.Fatal("Wake of a finished pod scheduled a call")
	}
	if err := w.Update(podworkers.PodUpdate{Type: podworkers.UpdateKill, Pod: p}); err != nil {
		t.Fatalf("kill of a finished pod = %v, want nil", err)
	}
	if err := w.Forget("a"); err != nil {
		t.Fatal(err)
	}
	if w.Phase("a") != podworkers.PhaseUnknown || w.Stats().Pods != 0 {
		t.Fatalf("after Forget: phase %v, stats %+v", w.Phase("a"), w.Stats())
	}
	create(t, w, p)
	settle(t, w)
	if got := f.snapshot(); len(got) != 6 || got[3].call != "SyncPod" || got[3].reason != podworkers.UpdateCreate {
		t.Fatalf("after Forget the UID must start a new life: %v", calls(got))
	}
}

// A kill cancels the running SyncPod; the pod then terminates with the
// kill's grace period, and later updates never bring SyncPod back.
func TestKillCancelsRunningSyncAndIsNeverLost(t *testing.T) {
	f := newFake()
	var canceled atomic.Bool
	f.syncPod = func(ctx context.Context, r rec) (podworkers.Result, error) {
		<-ctx.Done()
		canceled.Store(true)
		return podworkers.Result{}, ctx.Err()
	}
	release := make(chan struct{})
	f.terminating = func(ctx context.Context, r rec) error { <-release; return nil }
	w := newWorkers(t, f, podworkers.WithResyncInterval(0))
	p := pod("a")
	create(t, w, p)
	f.next(t) // SyncPod runs and blocks
	g := 2 * time.Second
	update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateKill, Pod: p, GracePeriod: &g})
	r := f.next(t)
	if !canceled.Load() || r.call != "Terminating" || r.grace != g {
		t.Fatalf("after the kill: canceled %v, next call %+v; want SyncPod cancelled then Terminating with 2s", canceled.Load(), r)
	}
	if ph := w.Phase("a"); ph != podworkers.PhaseTerminating {
		t.Fatalf("phase %v, want Terminating", ph)
	}
	// Updates while terminating replace the pod for the later phases only.
	p2 := pod("a")
	p2.Labels = map[string]string{"v": "2"}
	update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateUpdate, Pod: p2})
	w.Wake("a")
	close(release)
	settle(t, w)
	got := f.snapshot()
	// The update and wake during the termination coalesce into the next
	// phase's call: no second SyncTerminatingPod after a success.
	if want := []string{"SyncPod/a", "Terminating/a", "Terminated/a"}; !slices.Equal(calls(got), want) {
		t.Fatalf("calls %v, want %v", calls(got), want)
	}
	if got[2].pod != p2 {
		t.Fatal("SyncTerminatedPod did not get the last pod given")
	}
}

// A kill with a shorter grace period restarts the running termination with
// it; a longer one changes nothing.
func TestShorterGraceRestartsTermination(t *testing.T) {
	f := newFake()
	var n atomic.Int32
	f.terminating = func(ctx context.Context, r rec) error {
		if n.Add(1) == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	w := newWorkers(t, f, podworkers.WithResyncInterval(0))
	p := pod("a")
	long, short, longer := 30*time.Second, 5*time.Second, time.Minute
	update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateKill, Pod: p, GracePeriod: &long})
	if r := f.next(t); r.call != "Terminating" || r.grace != long {
		t.Fatalf("first call %+v, want Terminating with 30s", r)
	}
	update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateKill, Pod: p, GracePeriod: &short})
	if r := f.next(t); r.call != "Terminating" || r.grace != short {
		t.Fatalf("second call %+v, want Terminating with 5s", r)
	}
	settle(t, w)
	if err := w.Update(podworkers.PodUpdate{Type: podworkers.UpdateKill, Pod: p, GracePeriod: &longer}); err != nil {
		t.Fatal(err)
	}
	if got := calls(f.snapshot()); !slices.Equal(got, []string{"Terminating/a", "Terminating/a", "Terminated/a"}) {
		t.Fatalf("calls %v", got)
	}
}

// Updates and wakes during a running SyncPod collapse into one more call,
// with the last pod and the strongest reason.
func TestUpdatesCoalesce(t *testing.T) {
	f := newFake()
	gate := make(chan struct{})
	var first atomic.Bool
	f.syncPod = func(ctx context.Context, r rec) (podworkers.Result, error) {
		if first.CompareAndSwap(false, true) {
			<-gate
		}
		return podworkers.Result{}, nil
	}
	w := newWorkers(t, f, podworkers.WithResyncInterval(0))
	create(t, w, pod("a"))
	f.next(t)
	var last = pod("a")
	for i := range 10 {
		last = pod("a")
		last.Labels = map[string]string{"i": fmt.Sprint(i)}
		update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateUpdate, Pod: last})
		w.Wake("a")
		update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateSync, Pod: last})
	}
	close(gate)
	settle(t, w)
	got := f.snapshot()
	if len(got) != 2 || got[1].pod != last || got[1].reason != podworkers.UpdateUpdate {
		t.Fatalf("calls %v (second reason %v); want exactly 2 SyncPods, the second with the last pod and UpdateUpdate", calls(got), got[len(got)-1].reason)
	}
}

// An orphan is killed with SyncTerminatingRuntimePod alone.
func TestOrphan(t *testing.T) {
	f := newFake()
	var orphan atomic.Bool
	w := newWorkers(t, f, podworkers.WithObserver(func(e podworkers.Event) {
		if e.Kind == podworkers.EventFinished && e.Orphan {
			orphan.Store(true)
		}
	}))
	update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateKill, RuntimePod: &podworkers.RuntimePod{UID: "o", Namespace: "ns", Name: "old"}})
	settle(t, w)
	got := f.snapshot()
	if len(got) != 1 || got[0].call != "RuntimePod" || got[0].grace != podworkers.DefaultGracePeriod {
		t.Fatalf("calls %+v, want one SyncTerminatingRuntimePod with the default grace", got)
	}
	if w.Phase("o") != podworkers.PhaseFinished || !orphan.Load() {
		t.Fatalf("phase %v, orphan event %v", w.Phase("o"), orphan.Load())
	}
}

// A failing SyncPod is retried after a doubling back-off, capped, on the
// fake clock; a success resets it.
func TestBackOffDoubles(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	f := newFake()
	var fail atomic.Bool
	fail.Store(true)
	f.syncPod = func(context.Context, rec) (podworkers.Result, error) {
		if fail.Load() {
			return podworkers.Result{}, errors.New("boom")
		}
		return podworkers.Result{}, nil
	}
	delays := make(chan time.Duration, 100)
	w := newWorkers(t, f, podworkers.WithClock(clk), podworkers.WithResyncInterval(0),
		podworkers.WithBackOff(time.Second, 4*time.Second),
		podworkers.WithObserver(func(e podworkers.Event) {
			if e.Kind == podworkers.EventBackOff {
				delays <- e.Delay
			}
		}))
	create(t, w, pod("a"))
	var got []time.Duration
	for i := range 4 {
		d := <-delays
		got = append(got, d)
		settle(t, w)
		n := len(f.snapshot())
		clk.Step(d - time.Millisecond)
		settle(t, w)
		if len(f.snapshot()) != n {
			t.Fatalf("retry %d ran before its back-off %v ended", i, d)
		}
		if i == 3 {
			fail.Store(false)
		}
		clk.Step(time.Millisecond)
		f.next(t)
	}
	settle(t, w)
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("back-offs %v, want %v", got, want)
	}
	if st := w.Stats(); st.Calls != 5 || st.Failures != 4 {
		t.Fatalf("stats %+v, want 5 calls and 4 failures", st)
	}
	if clk.HasWaiters() {
		t.Fatal("a timer is armed after a success with resync disabled")
	}
}

// RequeueAfter and the resync interval re-sync a quiet pod on the fake clock.
func TestRequeueAfterAndResync(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	f := newFake()
	var n atomic.Int32
	f.syncPod = func(context.Context, rec) (podworkers.Result, error) {
		if n.Add(1) == 1 {
			return podworkers.Result{RequeueAfter: 3 * time.Second}, nil
		}
		return podworkers.Result{}, nil
	}
	w := newWorkers(t, f, podworkers.WithClock(clk), podworkers.WithResyncInterval(time.Minute))
	create(t, w, pod("a"))
	f.next(t)
	settle(t, w)
	clk.Step(3 * time.Second)
	if r := f.next(t); r.reason != podworkers.UpdateSync {
		t.Fatalf("requeue reason %v, want Sync", r.reason)
	}
	settle(t, w)
	clk.Step(time.Minute - time.Second)
	settle(t, w)
	if len(f.snapshot()) != 2 {
		t.Fatal("resync ran early")
	}
	clk.Step(time.Second)
	f.next(t)
}

// Wake syncs a known pod again, from outside and from inside a Syncer
// call, and is a no-op for an unknown UID.
func TestWake(t *testing.T) {
	f := newFake()
	var w *podworkers.Workers
	var n atomic.Int32
	f.syncPod = func(ctx context.Context, r rec) (podworkers.Result, error) {
		if n.Add(1) == 2 && !w.Wake(r.uid) { // from inside the call: no deadlock
			return podworkers.Result{}, errors.New("wake from a Syncer refused")
		}
		return podworkers.Result{}, nil
	}
	w = newWorkers(t, f, podworkers.WithResyncInterval(0))
	if w.Wake("a") {
		t.Fatal("Wake of an unknown UID scheduled a call")
	}
	create(t, w, pod("a"))
	settle(t, w)
	if !w.Wake("a") {
		t.Fatal("Wake of a known pod refused")
	}
	settle(t, w)
	got := f.snapshot()
	if len(got) != 3 || got[1].reason != podworkers.UpdateSync || w.Stats().Failures != 0 {
		t.Fatalf("calls %v, stats %+v; want 3 SyncPods (create, wake, self-wake)", calls(got), w.Stats())
	}
}

// With MaxParallel 3, three calls run and the other pods wait in the queue;
// no more than three goroutines exist; all pods are served.
func TestBoundedConcurrency(t *testing.T) {
	f := newFake()
	gate := make(chan struct{})
	var inflight, peak atomic.Int32
	f.syncPod = func(ctx context.Context, r rec) (podworkers.Result, error) {
		n := inflight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-gate
		inflight.Add(-1)
		return podworkers.Result{}, nil
	}
	w := newWorkers(t, f, podworkers.WithMaxParallel(3), podworkers.WithResyncInterval(0))
	for i := range 50 {
		create(t, w, pod(fmt.Sprint(i)))
	}
	for range 3 {
		f.next(t)
	}
	if st := w.Stats(); st.Running != 3 || st.Goroutines != 3 || st.Queued != 47 {
		t.Fatalf("stats %+v, want 3 running on 3 goroutines and 47 queued", st)
	}
	close(gate)
	settle(t, w)
	if got := len(f.snapshot()); got != 50 || peak.Load() > 3 {
		t.Fatalf("%d calls, peak %d in flight; want 50 and at most 3", got, peak.Load())
	}
	seen := map[types.UID]bool{}
	for _, r := range f.snapshot() {
		seen[r.uid] = true
	}
	if len(seen) != 50 {
		t.Fatalf("%d distinct pods synced, want 50", len(seen))
	}
}

// A pod that wakes itself on every call cannot starve the others.
func TestFairness(t *testing.T) {
	f := newFake()
	var w *podworkers.Workers
	gate := make(chan struct{})
	var first atomic.Bool
	f.syncPod = func(ctx context.Context, r rec) (podworkers.Result, error) {
		if r.uid == "hog" {
			if first.CompareAndSwap(false, true) {
				<-gate
			}
			if len(f.snapshot()) < 20 {
				w.Wake("hog")
			}
		}
		return podworkers.Result{}, nil
	}
	w = newWorkers(t, f, podworkers.WithMaxParallel(1), podworkers.WithResyncInterval(0))
	create(t, w, pod("hog"))
	f.next(t)
	create(t, w, pod("b"))
	create(t, w, pod("c"))
	close(gate)
	settle(t, w)
	got := calls(f.snapshot())
	if len(got) < 4 || !slices.Equal(got[:4], []string{"SyncPod/hog", "SyncPod/b", "SyncPod/c", "SyncPod/hog"}) {
		t.Fatalf("calls %v; b and c must run before hog's second call", got)
	}
}

// Idle pods hold no goroutine.
func TestIdlePodsHoldNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFake()
	w := newWorkers(t, f, podworkers.WithMaxParallel(0), podworkers.WithResyncInterval(time.Hour))
	for i := range 1000 {
		create(t, w, pod(fmt.Sprint(i)))
	}
	settle(t, w)
	if st := w.Stats(); st.Pods != 1000 || st.Calls != 1000 {
		t.Fatalf("stats %+v", st)
	}
	// Real-clock timers hold no goroutine; allow a little runtime noise.
	// Stats stops counting a pool goroutine just before it returns, so the
	// runtime may still list a few that are exiting: wait for them, but an
	// idle pod that holds a goroutine keeps the count up and fails.
	eventually(t, "the idle pods held no goroutine", func() string {
		if after := runtime.NumGoroutine(); after-before > 2 {
			return fmt.Sprintf("%d goroutines for 1000 idle pods (before %d)", after, before)
		}
		return ""
	})
}

// Close cancels the running calls, waits for them, and later calls fail
// with ErrClosed.
func TestCloseWithSyncsInFlight(t *testing.T) {
	f := newFake()
	var canceled atomic.Int32
	f.syncPod = func(ctx context.Context, r rec) (podworkers.Result, error) {
		<-ctx.Done()
		canceled.Add(1)
		return podworkers.Result{}, ctx.Err()
	}
	w, err := podworkers.New(f, podworkers.WithMaxParallel(4))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		create(t, w, pod(fmt.Sprint(i)))
	}
	for range 4 {
		f.next(t)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if canceled.Load() != 4 || w.Stats().Goroutines != 0 || len(f.snapshot()) != 4 {
		t.Fatalf("canceled %d, stats %+v, calls %d; want 4 cancelled calls, no goroutine, no new call", canceled.Load(), w.Stats(), len(f.snapshot()))
	}
	if err := w.Update(podworkers.PodUpdate{Type: podworkers.UpdateSync, Pod: pod("0")}); !errors.Is(err, podworkers.ErrClosed) {
		t.Fatalf("Update after Close = %v", err)
	}
}

// Stats counts a call as running until its timer is armed and its events
// observed: a caller that steps a fake clock once Queued and Running are 0
// never steps past the requeue, and has seen every event of the call.
func TestIdleStatsMeanTimerArmedAndEventsObserved(t *testing.T) {
	for i := range 200 {
		clk := testclock.NewFakeClock(t0)
		f := newFake()
		f.syncPod = func(context.Context, rec) (podworkers.Result, error) {
			return podworkers.Result{RequeueAfter: time.Second}, nil
		}
		var observed atomic.Int32
		w := newWorkers(t, f, podworkers.WithClock(clk), podworkers.WithResyncInterval(0),
			podworkers.WithObserver(func(e podworkers.Event) {
				if e.Kind == podworkers.EventCall {
					observed.Add(1)
				}
			}))
		create(t, w, pod(fmt.Sprint("p", i)))
		for s := w.Stats(); s.Queued != 0 || s.Running != 0; s = w.Stats() {
			runtime.Gosched()
		}
		if !clk.HasWaiters() {
			t.Fatalf("run %d: no call queued or running, and the requeue timer not armed", i)
		}
		if observed.Load() != 1 {
			t.Fatalf("run %d: no call queued or running, and its event not observed", i)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
