package crisim

import (
	"context"
	"math"
	"sync"
	"time"
)

// DefaultCPUWork is the CPU time WithCPU charges per call when its work map
// leaves a method out: what runc and the shim spend on a start, about, on a
// small node. A List costs a little too, so a relist slows down with the
// starts it shares the cores with. Methods not listed here cost no CPU.
var DefaultCPUWork = map[string]time.Duration{
	"RunPodSandbox":   60 * time.Millisecond,
	"CreateContainer": 20 * time.Millisecond,
	"StartContainer":  80 * time.Millisecond,
	"StopContainer":   10 * time.Millisecond,
	"StopPodSandbox":  10 * time.Millisecond,
	"ListPodSandbox":  1 * time.Millisecond,
	"ListContainers":  2 * time.Millisecond,
}

// cpuModel shares a fixed number of cores between the calls doing CPU
// work, as processor sharing: with n calls working, each progresses at
// min(1, cores/n) of real time, so when everything starts together every
// call takes about the burst's whole length, as on a real node whose runc
// processes share two cores, and the work done never exceeds the cores.
// Each working call keeps its own remaining work and sleeps on the
// runtime's clock until it would finish at the current share; every arrival
// and departure wakes the others to recompute. A call leaves the share the
// moment its work is done (advanceLocked), not when its goroutine wakes.
type cpuModel struct {
	cores int
	work  map[string]time.Duration

	mu    sync.Mutex
	jobs  map[*cpuJob]struct{}
	last  time.Time     // when remaining work was last brought up to date
	spent time.Duration // core time spent by every call so far
}

type cpuJob struct {
	remaining time.Duration
	kick      chan struct{} // the share changed: recompute
}

// WithCPU gives the runtime a CPU of cores cores. Each call of a method in
// work (DefaultCPUWork for a nil map) spends that much CPU after its
// latency, shared with the calls working at the same time: with 2 cores
// and 40 starts at once, each start takes about 20 times its work. Without
// WithCPU the runtime has no CPU limit. Cores below 1 and negative work
// are refused (a *ConfigError from New and Start).
func WithCPU(cores int, work map[string]time.Duration) Option {
	return func(c *config) {
		if cores < 1 {
			c.fail("WithCPU", "%d cores, want at least 1", cores)
			return
		}
		if work == nil {
			work = DefaultCPUWork
		}
		m := &cpuModel{cores: cores, work: map[string]time.Duration{}, jobs: map[*cpuJob]struct{}{}}
		for k, v := range work {
			if v < 0 {
				c.fail("WithCPU", "%s work %v is negative", k, v)
				return
			}
			m.work[k] = v
		}
		c.cpu = m
	}
}

// shareLocked is each working call's fraction of a core.
func (m *cpuModel) shareLocked() float64 {
	if n := len(m.jobs); n > m.cores {
		return float64(m.cores) / float64(n)
	}
	return 1
}

// advanceLocked charges the time since last to every working call, in
// steps that end where a call's work is done: from then on it is out of
// the share, though its goroutine has not woken yet to return. Charging it
// until its late timer fired would spend the cores on work that is over,
// the more so the bigger its share, so fewer calls at once would be
// charged for the runtime's wake-up latency and more of them would not.
func (m *cpuModel) advanceLocked(now time.Time) {
	for len(m.jobs) > 0 && m.last.Before(now) {
		share := m.shareLocked()
		first := time.Duration(math.MaxInt64)
		for j := range m.jobs {
			first = min(first, j.remaining)
		}
		step := min(now.Sub(m.last), time.Duration(math.Ceil(float64(first)/share)))
		done := time.Duration(float64(step) * share)
		m.spent += step * time.Duration(min(len(m.jobs), m.cores))
		m.last = m.last.Add(step)
		finished := false
		for j := range m.jobs {
			if j.remaining -= done; j.remaining <= 0 {
				delete(m.jobs, j)
				finished = true
				j.wake()
			}
		}
		if finished {
			m.kickLocked() // the others' share grew
		}
	}
	m.last = now
}

// kickLocked wakes every working call to recompute its share.
func (m *cpuModel) kickLocked() {
	for j := range m.jobs {
		j.wake()
	}
}

// wake tells the call's goroutine to look at its remaining work again; a
// wake-up already pending covers this one.
func (j *cpuJob) wake() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// cpuWork spends method's CPU work, sharing the cores with the calls
// working now.
func (r *Runtime) cpuWork(ctx context.Context, method string) error {
	m := r.cfg.cpu
	if m == nil || m.work[method] <= 0 {
		return nil
	}
	j := &cpuJob{remaining: m.work[method], kick: make(chan struct{}, 1)}
	m.mu.Lock()
	m.advanceLocked(r.clock.Now())
	m.jobs[j] = struct{}{}
	m.kickLocked()
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.advanceLocked(r.clock.Now())
		delete(m.jobs, j)
		m.kickLocked()
		m.mu.Unlock()
	}()
	for {
		m.mu.Lock()
		m.advanceLocked(r.clock.Now())
		left, share := j.remaining, m.shareLocked()
		m.mu.Unlock()
		if left <= 0 {
			return nil
		}
		if err := r.sleepOrWake(ctx, method, time.Duration(math.Ceil(float64(left)/share)), j.kick); err != nil {
			return err
		}
	}
}

// CPUBusy returns how many calls are spending CPU now (0 without WithCPU).
func (r *Runtime) CPUBusy() int {
	if !r.ready() || r.cfg.cpu == nil {
		return 0
	}
	m := r.cfg.cpu
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advanceLocked(r.clock.Now())
	return len(m.jobs)
}

// CPUTime returns the core time the calls have spent so far (0 without
// WithCPU): the model's cores times the elapsed time, less the time cores
// stood idle, so a harness can tell how well a load kept the cores busy.
func (r *Runtime) CPUTime() time.Duration {
	if !r.ready() || r.cfg.cpu == nil {
		return 0
	}
	m := r.cfg.cpu
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advanceLocked(r.clock.Now())
	return m.spent
}
