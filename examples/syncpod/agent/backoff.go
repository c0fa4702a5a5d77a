package agent

import (
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/backoff"
)

// Crash-loop backoff, the kubelet's constants: the first restart is
// immediate, then 10 s doubling up to 5 min; a container that ran without
// crashing for twice the maximum starts over.
const (
	CrashLoopInitial = 10 * time.Second  // the wait before the second restart
	CrashLoopMax     = 300 * time.Second // the longest wait
)

// crashBackoff is the per-container crash-loop back-off (internal/backoff,
// the kubelet's rule) on an injectable clock. Failures are recorded at the
// container's finish time, so the decision does not depend on when the
// sync happens to run.
type crashBackoff struct {
	clock clock.PassiveClock

	mu    sync.Mutex
	delay *backoff.Keyed[string]
}

func newCrashBackoff(clk clock.PassiveClock, initial, max time.Duration) *crashBackoff {
	return &crashBackoff{clock: clk, delay: backoff.NewKeyed[string](backoff.Policy{Initial: initial, Max: max})}
}

// inBackoff reports whether key, which last failed at finishedAt, must still
// wait, and for how long.
func (b *crashBackoff) inBackoff(key string, finishedAt time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.delay.Delay(key)
	if !ok {
		return false, 0
	}
	if left := d - b.clock.Since(finishedAt); left > 0 {
		return true, left
	}
	return false, 0
}

// next records a restart of key for a failure at finishedAt and returns
// the delay the following failure will wait.
func (b *crashBackoff) next(key string, finishedAt time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.delay.Fail(key, finishedAt)
}

// forgetPrefix drops every key of a pod (keys are "uid/container").
func (b *crashBackoff) forgetPrefix(prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.delay.Drop(func(k string) bool { return strings.HasPrefix(k, prefix) })
}

func (b *crashBackoff) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.delay.Len()
}
