package admission

import (
	"fmt"
	"sync"
	"time"
)

// Sample is one finished grant, as a Limiter sees it.
type Sample struct {
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
	Tolerance float64 // a sample slower than Tolerance x the fastest recent one is congestion (default 2)
}

// AIMD is an additive-increase, multiplicative-decrease bound driven by
// latency: see the package doc. Create it with NewAIMD.
type AIMD struct {
	cfg AIMDConfig

	mu       sync.Mutex
	limit    float64
	fastest  time.Duration // the fastest recent latency, drifting up slowly
	sinceCut int           // samples since the last decrease
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
		cfg.Tolerance = 2
	}
	if cfg.Min > cfg.Max {
		return bad("Min", fmt.Sprintf("%d is above Max %d", cfg.Min, cfg.Max))
	}
	if cfg.Initial < cfg.Min || cfg.Initial > cfg.Max {
		return bad("Initial", fmt.Sprintf("%d is outside [Min %d, Max %d]", cfg.Initial, cfg.Min, cfg.Max))
	}
	return &AIMD{cfg: cfg, limit: float64(cfg.Initial)}, nil
}

// Limit returns the current bound.
func (l *AIMD) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}

// Observe raises the bound by 1/bound for a fast sample and cuts it by
// Backoff for a slow or overloaded one, at most once per bound's worth of
// samples: the grants that were in flight together when the runtime slowed
// down all report it, and one slowdown is one cut.
func (l *AIMD) Observe(s Sample) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sinceCut++
	if s.Latency > 0 {
		// The fastest recent latency drifts up by 0.1% a sample, so a
		// runtime that became slower for good is not congestion forever.
		if l.fastest == 0 || s.Latency < l.fastest {
			l.fastest = s.Latency
		} else {
			l.fastest += l.fastest / 1000
		}
	}
	slow := s.Overload || (l.fastest > 0 && float64(s.Latency) > l.cfg.Tolerance*float64(l.fastest))
	switch {
	case slow && l.sinceCut >= int(l.limit):
		l.limit = max(float64(l.cfg.Min), l.limit*l.cfg.Backoff)
		l.sinceCut = 0
	case !slow:
		l.limit = min(float64(l.cfg.Max), l.limit+1/l.limit)
	}
}
