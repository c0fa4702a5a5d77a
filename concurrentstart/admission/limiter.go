package admission

import (
	"fmt"
	"sync"
	"time"
)

// Sample is one finished grant, as a Limiter sees it.
type Sample struct {
	Kind     string        // the Request's Kind
	Latency  time.Duration // from grant to Release
	InFlight int           // grants held when this one was granted, itself included
	Bound    int           // the Limiter's bound when this one was granted (0: unknown, taken as the current one)
	Overload bool          // the work failed with an overload error
}

// Limiter decides the bound on grants held at once. The Controller calls
// it under its own lock: implementations must be quick and must not call
// back into the Controller.
type Limiter interface {
	// Limit is the current bound; values below 1 are read as 1.
	Limit() int
	// Observe learns from one finished grant.
	Observe(Sample)
}

// Fixed is a constant bound.
type Fixed int

// Limit returns n.
func (n Fixed) Limit() int { return int(n) }

// Observe ignores the sample.
func (Fixed) Observe(Sample) {}

// AIMDConfig is the setting of an AIMD limiter. Zero fields take the
// defaults named beside them.
type AIMDConfig struct {
	Initial   int     // the first bound (default 6)
	Min       int     // never below (default 1)
	Max       int     // never above (default 64)
	Backoff   float64 // multiplier on congestion, in (0, 1) (default 0.75)
	Tolerance float64 // a window whose latencies average above Tolerance x their kinds' uncongested latency is congestion (default 1.5)

	// CPU, when set, reads the node's CPU time (NodeCPU reads Linux's
	// /proc/stat). A window within Tolerance over which the CPU was busy
	// SaturatedAt of its time or more does not raise the bound, and ends
	// slow start: the cores are used, and more grants would only share
	// them. Without it, latency alone decides; where the runtime's calls
	// queue for the CPU, their latency grows only slowly with the load,
	// and the bound drifts above what keeps the cores busy.
	CPU CPUReader
	// SaturatedAt is the fraction of the CPU's time busy at which it
	// counts as saturated, in (0, 1] (default 0.97). Used with CPU only.
	SaturatedAt float64
}

// CPUReader returns the CPU time spent busy and the CPU time elapsed, both
// summed over every core since some fixed moment (as /proc/stat counts
// them); the Limiter divides their growth between two calls. It is called
// under the Limiter's lock, twice a window (at its first sample and at its
// decision): it must be quick.
type CPUReader func() (busy, total time.Duration, err error)

// AIMD is an additive-increase, multiplicative-decrease bound driven by
// latency: see the package doc. Create it with NewAIMD.
type AIMD struct {
	cfg AIMDConfig

	mu    sync.Mutex
	limit float64
	bases map[string]*kindBase
	sum   float64 // the current window's latency ratios, summed
	n     int     // and counted
	cut   bool    // a cut happened: slow start is over

	cpuBusy, cpuTotal time.Duration // the CPU reading at the current window's first sample
	cpuRead           bool          // whether that reading was taken
}

// defaultInitial is the first bound when none is set. A burst's first
// grants find the runtime idle, and a call is not all CPU work: at 4 on
// two cores the slow start left core time unused before its first
// doubling; a real node's first windows are already saturated at 6, and
// no CPU reading guards the first bound. See BENCHMARKS.md.
const defaultInitial = 6

// aimdWindow is how many samples are averaged before a decision: single
// RPC latencies are heavy-tailed (a p99 four times the median is usual),
// and one slow call is not congestion; the mean of several moves with the
// load.
const aimdWindow = 8

// baseSamples caps how many samples a kind's uncongested latency averages:
// past it the mean becomes a moving average, so that a runtime that became
// slower for good stops looking congested.
const baseSamples = 32

// kindBase is one kind's uncongested latency: the mean latency of its
// grants made at the lowest load seen, where any load up to the first
// bound counts as lowest. A mean, not a minimum: the minimum of noisy
// latencies sits well below their mean, and a bound compared with it
// sees congestion in every ordinary window.
type kindBase struct {
	level int // grants in flight at or below which a sample counts
	mean  time.Duration
	n     int
}

// learn adds s to the uncongested latency when it was granted at low load.
func (k *kindBase) learn(s Sample, low int) {
	level := max(low, s.InFlight)
	if k.n == 0 || level < k.level {
		k.level, k.mean, k.n = level, s.Latency, 1
		return
	}
	if s.InFlight > k.level {
		return
	}
	k.n = min(k.n+1, baseSamples)
	k.mean += (s.Latency - k.mean) / time.Duration(k.n)
}

var (
	_ Limiter = (*AIMD)(nil)
	_ Limiter = Fixed(0)
)

// NewAIMD returns an AIMD limiter, or a *ConfigError for a bad setting.
func NewAIMD(cfg AIMDConfig) (*AIMD, error) {
	bad := func(field, reason string) (*AIMD, error) {
		return nil, &ConfigError{Option: "AIMDConfig." + field, Reason: reason}
	}
	if cfg.Initial < 0 || cfg.Min < 0 || cfg.Max < 0 {
		return bad("Initial/Min/Max", "must not be negative")
	}
	if cfg.Backoff < 0 || cfg.Backoff >= 1 {
		return bad("Backoff", fmt.Sprintf("%v is not in (0, 1)", cfg.Backoff))
	}
	if cfg.Tolerance != 0 && cfg.Tolerance <= 1 {
		return bad("Tolerance", fmt.Sprintf("%v is not above 1", cfg.Tolerance))
	}
	if cfg.Min == 0 {
		cfg.Min = 1
	}
	if cfg.Max == 0 {
		cfg.Max = 64
	}
	if cfg.Initial == 0 {
		cfg.Initial = min(max(defaultInitial, cfg.Min), cfg.Max)
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 0.75
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = 1.5
	}
	if cfg.SaturatedAt < 0 || cfg.SaturatedAt > 1 {
		return bad("SaturatedAt", fmt.Sprintf("%v is not in (0, 1]", cfg.SaturatedAt))
	}
	if cfg.SaturatedAt == 0 {
		cfg.SaturatedAt = 0.97
	}
	if cfg.Min > cfg.Max {
		return bad("Min", fmt.Sprintf("%d is above Max %d", cfg.Min, cfg.Max))
	}
	if cfg.Initial < cfg.Min || cfg.Initial > cfg.Max {
		return bad("Initial", fmt.Sprintf("%d is outside [Min %d, Max %d]", cfg.Initial, cfg.Min, cfg.Max))
	}
	return &AIMD{cfg: cfg, limit: float64(cfg.Initial), bases: map[string]*kindBase{}}, nil
}

// Limit returns the current bound.
func (l *AIMD) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}

// Observe learns from s. A sample speaks only for the bound it was
// granted under: one granted under an earlier bound shows a load that the
// change since has answered, so it only teaches the uncongested latency.
// An overload error cuts the bound by Backoff at once. Otherwise s's
// latency, divided by its kind's uncongested latency, joins a window
// shared by all kinds; a full window whose mean ratio is above Tolerance
// cuts the bound, and one that is not raises it: doubling until the first
// cut (slow start), then by one, as TCP grows its window per round trip.
// With a CPU reading, a window over which the CPU was saturated holds the
// bound instead of raising it, and ends slow start.
func (l *AIMD) Observe(s Sample) {
	l.mu.Lock()
	defer l.mu.Unlock()
	current := s.Bound == 0 || s.Bound == int(l.limit)
	if s.Overload {
		if current {
			l.cutLocked()
		}
		return
	}
	k := l.bases[s.Kind]
	if k == nil {
		k = &kindBase{}
		l.bases[s.Kind] = k
	}
	k.learn(s, l.cfg.Initial)
	if k.mean <= 0 || !current {
		return // an instant call is never congested
	}
	if l.n == 0 {
		// A window's CPU is measured from its first sample, not from the
		// last decision: an agent idle since then would otherwise find
		// the CPU of a whole burst diluted by the quiet before it.
		l.markCPULocked()
	}
	l.sum += float64(s.Latency) / float64(k.mean)
	l.n++
	window := aimdWindow
	if !l.cut {
		// Slow start decides once a round trip, after a bound's worth
		// of samples, as TCP does: a burst's first grants find the
		// runtime idle, and a full window at a small bound keeps it so.
		window = min(aimdWindow, max(2, int(l.limit)))
	}
	if l.n < window {
		return
	}
	mean := l.sum / float64(l.n)
	if mean > l.cfg.Tolerance {
		l.cutLocked()
		return
	}
	if l.saturatedLocked() {
		// The cores are used: more grants would only share them, so the
		// bound holds, and slow start is over.
		l.cut = true
		l.setLocked(l.limit)
		return
	}
	next := l.limit + 1
	if !l.cut {
		next = l.limit * 2
	}
	l.setLocked(next)
}

// setLocked moves the bound and starts a new window for it.
func (l *AIMD) setLocked(limit float64) {
	l.limit = min(float64(l.cfg.Max), max(float64(l.cfg.Min), limit))
	l.sum, l.n = 0, 0
}

// markCPULocked takes the CPU reading the window is measured from.
func (l *AIMD) markCPULocked() {
	if l.cfg.CPU == nil {
		return
	}
	busy, total, err := l.cfg.CPU()
	l.cpuBusy, l.cpuTotal, l.cpuRead = busy, total, err == nil
}

// saturatedLocked reports whether the CPU was busy SaturatedAt of the
// time since the current window's first sample. No reading, or no time
// elapsed, is not saturation: latency alone decides then.
func (l *AIMD) saturatedLocked() bool {
	if !l.cpuRead { // no CPU, or its reading at the window's start failed
		return false
	}
	busy, total, err := l.cfg.CPU()
	if err != nil {
		return false
	}
	db, dt := busy-l.cpuBusy, total-l.cpuTotal
	return dt > 0 && float64(db) >= l.cfg.SaturatedAt*float64(dt)
}

func (l *AIMD) cutLocked() {
	l.cut = true
	l.setLocked(l.limit * l.cfg.Backoff)
}
