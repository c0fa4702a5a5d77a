package agent_test

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// deadlineClock is a fake clock that knows when its timers fire next, so a
// test can step it exactly to the next deadline rather than by a fixed
// amount that may jump past one.
type deadlineClock struct {
	*clocktesting.FakeClock

	mu        sync.Mutex
	deadlines map[*deadline]struct{}
}

// deadline is one timer's (or ticker's) next firing.
type deadline struct {
	at     time.Time
	period time.Duration // > 0: a ticker, firing every period after at
}

var _ clock.WithTickerAndDelayedExecution = (*deadlineClock)(nil)

func newDeadlineClock(t time.Time) *deadlineClock {
	return &deadlineClock{FakeClock: clocktesting.NewFakeClock(t), deadlines: map[*deadline]struct{}{}}
}

func (c *deadlineClock) track(d time.Duration, period time.Duration) *deadline {
	dl := &deadline{at: c.Now().Add(d), period: period}
	c.mu.Lock()
	c.deadlines[dl] = struct{}{}
	c.mu.Unlock()
	return dl
}

func (c *deadlineClock) untrack(dl *deadline) {
	c.mu.Lock()
	delete(c.deadlines, dl)
	c.mu.Unlock()
}

// next returns the earliest deadline after now, and false if no timer is
// waiting.
func (c *deadlineClock) next() (time.Time, bool) {
	now := c.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var best time.Time
	for dl := range c.deadlines {
		at := dl.at
		if !at.After(now) {
			if dl.period <= 0 {
				delete(c.deadlines, dl) // fired
				continue
			}
			at = at.Add((now.Sub(at)/dl.period + 1) * dl.period)
		}
		if best.IsZero() || at.Before(best) {
			best = at
		}
	}
	return best, !best.IsZero()
}

// stepToNext moves the clock to the next deadline, firing what is due then.
func (c *deadlineClock) stepToNext() bool {
	at, ok := c.next()
	if ok {
		c.SetTime(at)
	}
	return ok
}

func (c *deadlineClock) After(d time.Duration) <-chan time.Time {
	c.track(d, 0)
	return c.FakeClock.After(d)
}

func (c *deadlineClock) NewTimer(d time.Duration) clock.Timer {
	return &deadlineTimer{Timer: c.FakeClock.NewTimer(d), c: c, dl: c.track(d, 0)}
}

func (c *deadlineClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return &deadlineTimer{Timer: c.FakeClock.AfterFunc(d, f), c: c, dl: c.track(d, 0)}
}

func (c *deadlineClock) NewTicker(d time.Duration) clock.Ticker {
	return &deadlineTicker{Ticker: c.FakeClock.NewTicker(d), c: c, dl: c.track(d, d)}
}

func (c *deadlineClock) Tick(d time.Duration) <-chan time.Time {
	c.track(d, d)
	return c.FakeClock.Tick(d)
}

type deadlineTimer struct {
	clock.Timer
	c  *deadlineClock
	mu sync.Mutex
	dl *deadline
}

func (t *deadlineTimer) Stop() bool {
	t.mu.Lock()
	t.c.untrack(t.dl)
	t.mu.Unlock()
	return t.Timer.Stop()
}

func (t *deadlineTimer) Reset(d time.Duration) bool {
	t.mu.Lock()
	t.c.untrack(t.dl)
	t.dl = t.c.track(d, 0)
	t.mu.Unlock()
	return t.Timer.Reset(d)
}

type deadlineTicker struct {
	clock.Ticker
	c  *deadlineClock
	dl *deadline
}

func (t *deadlineTicker) Stop() {
	t.c.untrack(t.dl)
	t.Ticker.Stop()
}
