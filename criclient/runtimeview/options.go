package runtimeview

import (
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/typednil"
)

// Option configures a View at New. Options apply in order, a nil Option is
// ignored, and New refuses an invalid value with a *ConfigError.
type Option func(*config)

type config struct {
	relistPeriod  time.Duration
	maxStaleness  time.Duration
	statusTimeout time.Duration
	staleReads    bool
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
// DefaultRelistPeriod). It must be positive.
func WithRelistPeriod(d time.Duration) Option {
	return func(c *config) { c.relistPeriod = d }
}

// WithMaxStaleness sets the staleness bound (default DefaultMaxStaleness):
// a read fails with *StaleError rather than return data from a relist that
// started longer ago. It should be several relist periods plus the
// runtime's worst List latency. It must be positive.
func WithMaxStaleness(d time.Duration) Option {
	return func(c *config) { c.maxStaleness = d }
}

// WithStaleReads sets what a read returns once the data is older than the
// staleness bound (default false: it fails with *StaleError). With true it
// returns the last data the view holds, as it would within the bound, and
// stops waiting for unconfirmed mutations at the bound (so a mutation the
// runtime could not confirm may be missing from it); Health still reports
// the *StaleError. Use it only when the caller tells its own clients, by
// another path, that the runtime does not answer: a CRI proxy whose Status
// says RuntimeReady false keeps the kubelet's relist answered while the
// kubelet marks the node NotReady for the runtime, not for its PLEG.
func WithStaleReads(enabled bool) Option {
	return func(c *config) { c.staleReads = enabled }
}

// WithStatusTimeout bounds each status call made to confirm a mutation
// (default 30s). It must be positive.
func WithStatusTimeout(d time.Duration) Option {
	return func(c *config) { c.statusTimeout = d }
}

// WithClock sets the clock for relist ticks, ages and back-off (default the
// real clock). Tests pass k8s.io/utils/clock/testing's fake clock. It must
// not be nil.
func WithClock(clk clock.WithTicker) Option {
	return func(c *config) { c.clock = clk }
}

// WithLogger sets the logger (default zap.NewNop()). It must not be nil.
func WithLogger(l *zap.Logger) Option {
	return func(c *config) { c.logger = l }
}

// validate says which setting of c cannot be used.
func (c *config) validate() *ConfigError {
	for _, d := range []struct {
		option string
		d      time.Duration
	}{
		{"WithRelistPeriod", c.relistPeriod},
		{"WithMaxStaleness", c.maxStaleness},
		{"WithStatusTimeout", c.statusTimeout},
	} {
		if d.d <= 0 {
			return &ConfigError{Option: d.option, Reason: fmt.Sprintf("%v is not positive", d.d)}
		}
	}
	switch {
	case typednil.Is(c.clock):
		return &ConfigError{Option: "WithClock", Reason: "must not be nil"}
	case c.logger == nil:
		return &ConfigError{Option: "WithLogger", Reason: "must not be nil"}
	}
	return nil
}
