package statecache

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"
)

// globalTime holds the cache-wide "everything is at least this fresh" time
// and the GetNewerThan calls that wait for it to pass their minTime.
//
// The time itself is read lock-free (atomic pointer) on every freshness
// check. Waiters sit in a min-heap ordered by minTime, so UpdateTime(t) pops
// exactly the waiters with minTime < t, at O(log n) each, and never looks at
// a waiter it does not wake. The kubelet instead walks every subscriber of
// every pod on each UpdateTime.
type globalTime struct {
	now atomic.Pointer[time.Time] // nil until the first UpdateTime

	mu      sync.Mutex // guards waiters and serialises writers of now
	waiters waiterHeap
}

// globalWaiter is one GetNewerThan call blocked on the global time.
type globalWaiter struct {
	minTime time.Time
	ready   chan struct{} // closed once the global time is after minTime
	index   int           // position in the heap; -1 once popped or removed
}

// load returns the global time and whether one was ever set.
func (g *globalTime) load() (time.Time, bool) {
	if p := g.now.Load(); p != nil {
		return *p, true
	}
	return time.Time{}, false
}

// after reports whether a global time is set and is after t.
func (g *globalTime) after(t time.Time) bool {
	p := g.now.Load()
	return p != nil && p.After(t)
}

// advance moves the global time forward to t (an older t is ignored) and
// wakes every waiter whose minTime is before t.
func (g *globalTime) advance(t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur := g.now.Load(); cur != nil && cur.After(t) {
		return
	}
	g.now.Store(&t)
	for len(g.waiters) > 0 && g.waiters[0].minTime.Before(t) {
		w := heap.Pop(&g.waiters).(*globalWaiter)
		close(w.ready)
	}
}

// register adds a waiter for minTime, or returns nil when the global time is
// already after minTime. Checking and adding under one lock is what makes a
// concurrent advance unable to slip between them.
func (g *globalTime) register(minTime time.Time) *globalWaiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.after(minTime) {
		return nil
	}
	w := &globalWaiter{minTime: minTime, ready: make(chan struct{})}
	heap.Push(&g.waiters, w)
	return w
}

// unregister removes w if it is still waiting.
func (g *globalTime) unregister(w *globalWaiter) {
	if w == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.index >= 0 {
		heap.Remove(&g.waiters, w.index)
	}
}

// len returns the number of waiters on the global time.
func (g *globalTime) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiters)
}

// waiterHeap is a container/heap of waiters ordered by minTime.
type waiterHeap []*globalWaiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].minTime.Before(h[j].minTime) }
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *waiterHeap) Push(x any) {
	w := x.(*globalWaiter)
	w.index = len(*h)
	*h = append(*h, w)
}

func (h *waiterHeap) Pop() any {
	old := *h
	n := len(old)
	w := old[n-1]
	old[n-1] = nil
	w.index = -1
	*h = old[:n-1]
	return w
}
