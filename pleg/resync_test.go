package pleg

import (
	"context"
	"testing"
	"time"
)

// A pod whose events keep being dropped gets a PodSync after each drop, but
// behind the pods that were owed one first: it cannot starve them. Pod a is
// dropped again as soon as each of its PodSyncs is read (with its PodSync
// in flight or just booked: either way it goes behind b and c, which the
// smallest-UID-first order did not do).
func TestRedirtiedPodDoesNotStarveOthers(t *testing.T) {
	f := newFixture(t, WithChannelCapacity(0)) // every non-blocking send drops
	p := f.p
	ctx, cancel := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() { defer close(loopDone); p.resyncLoop(ctx) }()
	defer func() { cancel(); <-loopDone }()

	p.mu.Lock()
	p.deliverLocked([]Event{ev("a", ContainerStarted, "c1"), ev("b", ContainerStarted, "c2"), ev("c", ContainerStarted, "c3")})
	p.mu.Unlock()

	var got []Event
	for len(got) < 6 {
		select {
		case e := <-p.Watch():
			got = append(got, e)
			if e.ID == "a" {
				p.mu.Lock()
				p.deliverLocked([]Event{ev("a", ContainerDied, "c1")}) // dropped again
				p.mu.Unlock()
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no PodSync after %v", got)
		}
	}
	want := []Event{ev("a", PodSync, ""), ev("b", PodSync, ""), ev("c", PodSync, ""), ev("a", PodSync, ""), ev("a", PodSync, ""), ev("a", PodSync, "")}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("PodSyncs %v, want %v", got, want)
		}
	}
}

func TestDirtyQueueOrder(t *testing.T) {
	q := newDirtyQueue()
	if _, _, ok := q.next(); ok {
		t.Fatal("empty queue has a next")
	}
	q.add("b")
	q.add("a")
	q.add("b") // already queued: keeps its place
	uid, n, _ := q.next()
	if uid != "b" || n != 2 {
		t.Fatalf("next = %s %d, want b 2", uid, n)
	}
	q.add("b") // dropped again while its PodSync is in flight
	q.delivered("b", n)
	if uid, _, _ := q.next(); uid != "a" || q.len() != 2 {
		t.Fatalf("next = %s (len %d), want a, then b again", uid, q.len())
	}
	q.delivered("a", 1)
	uid, n, _ = q.next()
	q.delivered(uid, n)
	if uid != "b" || q.len() != 0 || len(q.drops) != 0 {
		t.Fatalf("after draining: last %s, len %d, drops %v", uid, q.len(), q.drops)
	}
}
