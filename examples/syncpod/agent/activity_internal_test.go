package agent

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/podworkers"
)

func waitIdle(t *testing.T, a *activity) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang is a failure, not a speed test
	for !a.idle() {
		if time.Now().After(deadline) {
			t.Fatal("never idle")
		}
		time.Sleep(time.Millisecond)
	}
}

// testWorkers is the agent's pod workers over sync and kill, without the
// rest of an agent; finished counts the pods that finished.
type testWorkers struct {
	*podworkers.Workers
	syncer   *podSyncer
	finished atomic.Int32
}

func newTestWorkers(t *testing.T, clk *clocktesting.FakeClock, sync func(context.Context, *corev1.Pod) syncResult,
	kill func(context.Context, *corev1.Pod, time.Duration) error) *testWorkers {
	t.Helper()
	tw := &testWorkers{syncer: &podSyncer{sync: sync, kill: kill, terminated: func(types.UID) {},
		orphan: func(context.Context, types.UID, time.Duration) {}, active: &activity{}}}
	w, err := newPodWorkers(tw.syncer, clk, time.Second, func(types.UID) { tw.finished.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	tw.Workers = w
	return tw
}

func (tw *testWorkers) idle() bool { return tw.syncer.idle(tw.Workers) }

func (tw *testWorkers) waitIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang is a failure, not a speed test
	for !tw.idle() {
		if time.Now().After(deadline) {
			t.Fatal("never idle")
		}
		time.Sleep(time.Millisecond)
	}
}

func update(t *testing.T, w *testWorkers, pod *corev1.Pod) {
	t.Helper()
	if err := w.Update(podworkers.PodUpdate{Type: podworkers.UpdateUpdate, Pod: pod}); err != nil {
		t.Fatal(err)
	}
}

// A worker counts as busy from the wake (an update, or its requeue timer
// firing inside the clock's Step) until its sync has returned and its next
// timer is armed: a test stepping the clock whenever the count is zero can
// never skip that timer.
func TestPodWorkersActivityCoversSyncAndRequeue(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	release := make(chan struct{})
	syncs := make(chan struct{}, 10)
	sync := func(ctx context.Context, pod *corev1.Pod) syncResult {
		syncs <- struct{}{}
		<-release
		return syncResult{requeueAfter: time.Minute}
	}
	w := newTestWorkers(t, clk, sync, func(context.Context, *corev1.Pod, time.Duration) error { return nil })
	defer func() { _ = w.Close() }()
	defer close(release)
	update(t, w, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}})
	if w.idle() {
		t.Fatal("idle right after the update")
	}
	<-syncs
	if w.idle() {
		t.Fatal("idle during a sync")
	}
	release <- struct{}{}
	w.waitIdle(t)
	if !clk.HasWaiters() {
		t.Fatal("idle before the requeue timer was armed")
	}
	clk.Step(time.Minute)
	if w.idle() {
		t.Fatal("idle right after the requeue timer fired")
	}
	<-syncs
	release <- struct{}{}
	w.waitIdle(t)
}

// A sync parked in the status cache's GetNewerThan leaves the workers
// idle; the write that satisfies it makes them busy again.
func TestPodWorkersParkedSyncIsIdle(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	store := newStatusCache()
	t0 := time.Unix(100, 0)
	store.UpdateTime(t0)
	returned := make(chan struct{}, 1)
	sync := func(ctx context.Context, pod *corev1.Pod) syncResult {
		_, err := store.GetNewerThan(ctx, pod.UID, t0)
		returned <- struct{}{}
		return syncResult{err: err}
	}
	w := newTestWorkers(t, clk, sync, func(context.Context, *corev1.Pod, time.Duration) error { return nil })
	store.trackReads(w.syncer.active)
	defer func() { _ = w.Close() }()
	update(t, w, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}})
	w.waitIdle(t) // parked
	if w.Stats().Running != 1 {
		t.Fatalf("stats %+v, want the parked sync running", w.Stats())
	}
	store.UpdateTime(t0.Add(time.Second))
	if w.idle() {
		t.Fatal("idle right after the write that satisfies the parked sync")
	}
	<-returned
	w.waitIdle(t)
}

// A read parked in GetNewerThan does not count; the write that satisfies
// it counts it again before the write returns, and the reader does not
// count itself twice.
func TestTrackedStoreParkedReads(t *testing.T) {
	a := &activity{}
	s := newStatusCache()
	s.trackReads(a)
	t0 := time.Unix(100, 0)
	s.UpdateTime(t0)
	a.add(1) // the reading worker
	done := make(chan error, 1)
	go func() {
		_, err := s.GetNewerThan(context.Background(), types.UID("u"), t0)
		done <- err
	}()
	waitIdle(t, a)   // parked
	s.UpdateTime(t0) // not newer: still parked
	if !a.idle() {
		t.Fatal("an UpdateTime that satisfies nobody counted a reader")
	}
	s.UpdateTime(t0.Add(time.Second))
	if a.idle() {
		t.Fatal("idle right after the UpdateTime that satisfies the read")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := a.n.Load(); got != 1 {
		t.Fatalf("activity = %d after the read returned, want 1 (the worker)", got)
	}
	a.add(-1)

	// A fresh entry is read without parking.
	s.Set("v", &runtimePodStatus{UID: "v"}, nil, t0.Add(2*time.Second))
	a.add(1)
	if _, err := s.GetNewerThan(context.Background(), "v", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := a.n.Load(); got != 1 {
		t.Fatalf("activity = %d after a fresh read, want 1", got)
	}
}
