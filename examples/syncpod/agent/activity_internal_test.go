package agent

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
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

// A worker counts as busy from the wake (UpdatePod, or its requeue timer
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
	w := newPodWorkers(clk, sync, func(context.Context, *corev1.Pod) error { return nil }, time.Second)
	defer w.Stop()
	defer close(release)
	w.UpdatePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}})
	if w.active.idle() {
		t.Fatal("idle right after UpdatePod")
	}
	<-syncs
	if w.active.idle() {
		t.Fatal("idle during a sync")
	}
	release <- struct{}{}
	waitIdle(t, w.active)
	if !clk.HasWaiters() {
		t.Fatal("idle before the requeue timer was armed")
	}
	clk.Step(time.Minute)
	if w.active.idle() {
		t.Fatal("idle right after the requeue timer fired")
	}
	<-syncs
	release <- struct{}{}
	waitIdle(t, w.active)
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
