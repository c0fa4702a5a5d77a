package runtimeview

import (
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// Option configures a View at New.
type Option func(*config)

type config struct {
	relistPeriod  time.Duration
	maxStaleness  time.Duration
	statusTimeout time.Duration
	clock         clock.WithTicker
	logger        *zap.Logger
}

// Defaults of New.
const (
	// DefaultRelistPeriod is how often the view relists the runtime, as
	// the kubelet's PLEG does.
	DefaultRelistPeriod = time.Second
	// DefaultMaxStaleness bounds the age of the data a read may return.
	DefaultMaxStaleness = 10 * time.Second
	// DefaultBuffer is the buffer of a subscription created with
	// Subscribe(0).
	DefaultBuffer = 1000
)

func defaultConfig() config {
	return config{
		relistPeriod:  DefaultRelistPeriod,
		maxStaleness:  DefaultMaxStaleness,
		statusTimeout: 30 * time.Second,
		clock:         clock.RealClock{},
		logger:        zap.NewNop(),
	}
}

// WithRelistPeriod sets how often the runtime is relisted (default
// DefaultRelistPeriod). Values <= 0 are ignored.
func WithRelistPeriod(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.relistPeriod = d
		}
	}
}

// WithMaxStaleness sets the staleness bound (default DefaultMaxStaleness):
// a read fails with *StaleError rather than return data from a relist that
// started longer ago. It should be several relist periods plus the
// runtime's worst List latency. Values <= 0 are ignored.
func WithMaxStaleness(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.maxStaleness = d
		}
	}
}

// WithStatusTimeout bounds each status call made to confirm a mutation
// (default 30s). Values <= 0 are ignored.
func WithStatusTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.statusTimeout = d
		}
	}
}

// WithClock sets the clock for relist ticks, ages and back-off (default the
// real clock). Tests pass k8s.io/utils/clock/testing's fake clock.
func WithClock(clk clock.WithTicker) Option {
	return func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	}
}

// WithLogger sets the logger (default zap.NewNop()).
func WithLogger(l *zap.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}
