package agent

import (
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Crash-loop backoff, the kubelet's constants: the first restart is
// immediate, then 10 s doubling up to 5 min; a container that ran without
// crashing for twice the maximum starts over.
const (
	crashLoopInitial = 10 * time.Second  // the wait before the second restart
	crashLoopMax     = 300 * time.Second // the longest wait
)

// crashBackoff is the per-container crash-loop back-off, the kubelet's
// rule, on an injectable clock. It is the agent's own (a few lines) so
// that the example builds wherever it is copied. Failures are recorded at
// the container's finish time, so the decision does not depend on when
// the sync happens to run.
type crashBackoff struct {
	clock        clock.PassiveClock
	initial, max time.Duration

	mu      sync.Mutex
	entries map[string]crashEntry // key: "uid/container"
}

type crashEntry struct {
	delay time.Duration // what the last failure waits
	last  time.Time     // when it failed
}

func newCrashBackoff(clk clock.PassiveClock, initial, max time.Duration) *crashBackoff {
	return &crashBackoff{clock: clk, initial: initial, max: max, entries: map[string]crashEntry{}}
}

// inBackoff reports whether key, which last failed at finishedAt, must still
// wait, for how long, and its back-off period (what the wait started from).
func (b *crashBackoff) inBackoff(key string, finishedAt time.Time) (in bool, left, period time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return false, 0, 0
	}
	if left := e.delay - b.clock.Since(finishedAt); left > 0 {
		return true, left, e.delay
	}
	return false, 0, e.delay
}

// next records a restart of key for a failure at finishedAt and returns
// the delay the following failure will wait. A key quiet for twice the
// maximum starts over at the initial delay.
func (b *crashBackoff) next(key string, finishedAt time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || finishedAt.Sub(e.last) > 2*b.max {
		e.delay = b.initial
	} else {
		e.delay = min(2*e.delay, b.max)
	}
	e.last = finishedAt
	b.entries[key] = e
	return e.delay
}

// forgetPrefix drops every key of a pod (keys are "uid/container").
func (b *crashBackoff) forgetPrefix(prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if strings.HasPrefix(k, prefix) {
			delete(b.entries, k)
		}
	}
}

func (b *crashBackoff) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.entries)
}
