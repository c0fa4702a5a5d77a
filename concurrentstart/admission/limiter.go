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
	Initial   int     // the first bound (default 4)
	Min       int     // never below (default 1)
	Max       int     // never above (default 64)
	Backoff   float64 // multiplier on congestion, in (0, 1) (default 0.75)
	Tolerance float64 // a window mean above Tolerance x the kind's uncongested latency is congestion (default 1.5)
}

// AIMD is an additive-increase, multiplicative-decrease bound driven by
// latency: see the package doc. Create it with NewAIMD.
type AIMD struct {
	cfg AIMDConfig

	mu       sync.Mutex
	limit    float64
	kinds    map[string]*kindWindow
	sinceCut int  // samples since the last cut
	cut      bool // a cut happened: slow start is over
}

// aimdWindow is how many samples of one kind are averaged before a
// decision: single RPC latencies are heavy-tailed (a p99 four times the
// median is usual), and one slow call is not congestion; the mean of
// several moves with the load.
const aimdWindow = 8

// kindWindow is one kind's current window and its uncongested latency:
// the lowest window mean seen, drifting up 1% a window so that a runtime
// that became slower for good is not congestion forever.
type kindWindow struct {
	sum  time.Duration
	n    int
	base time.Duration
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
		cfg.Initial = min(max(4, cfg.Min), cfg.Max)
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 0.75
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = 1.5
	}
	if cfg.Min > cfg.Max {
		return bad("Min", fmt.Sprintf("%d is above Max %d", cfg.Min, cfg.Max))
	}
	if cfg.Initial < cfg.Min || cfg.Initial > cfg.Max {
		return bad("Initial", fmt.Sprintf("%d is outside [Min %d, Max %d]", cfg.Initial, cfg.Min, cfg.Max))
	}
	return &AIMD{cfg: cfg, limit: float64(cfg.Initial), kinds: map[string]*kindWindow{}}, nil
}

// Limit returns the current bound.
func (l *AIMD) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}

// Observe adds s to its kind's window. An overload error cuts the bound
// by Backoff at once; a full window whose mean latency is above Tolerance
// times the kind's uncongested latency cuts it too, and one that is not
// raises it by one: a step per window, as TCP grows its window per round
// trip.
func (l *AIMD) Observe(s Sample) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sinceCut++
	if s.Overload {
		// The grants in flight together fail together: one cut for them.
		if l.sinceCut >= int(l.limit) {
			l.cutLocked()
		}
		return
	}
	k := l.kinds[s.Kind]
	if k == nil {
		k = &kindWindow{}
		l.kinds[s.Kind] = k
	}
	k.sum += s.Latency
	k.n++
	if k.n < aimdWindow {
		return
	}
	mean := k.sum / time.Duration(k.n)
	k.sum, k.n = 0, 0
	if k.base == 0 || mean < k.base {
		k.base = mean
	} else {
		k.base += k.base / 100
	}
	if float64(mean) > l.cfg.Tolerance*float64(k.base) {
		// Every kind's window that overlapped the slowdown reports it,
		// and the grants that caused it finish after the cut: one cut
		// per bound's worth of samples.
		if l.sinceCut >= int(l.limit) {
			l.cutLocked()
		}
		return
	}
	if l.cut {
		l.limit = min(float64(l.cfg.Max), l.limit+1)
	} else { // slow start: double until the first sign of congestion
		l.limit = min(float64(l.cfg.Max), l.limit*2)
	}
}

func (l *AIMD) cutLocked() {
	l.limit = max(float64(l.cfg.Min), l.limit*l.cfg.Backoff)
	l.sinceCut, l.cut = 0, true
}
