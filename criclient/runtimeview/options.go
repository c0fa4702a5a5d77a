package runtimeview

import (
	"fmt"
	"reflect"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// Option configures a View at New. An option given an invalid value makes
// New fail with a *ConfigError.
type Option func(*config) error

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
// DefaultRelistPeriod). It must be positive.
func WithRelistPeriod(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return positiveError("WithRelistPeriod", d)
		}
		c.relistPeriod = d
		return nil
	}
}

// WithMaxStaleness sets the staleness bound (default DefaultMaxStaleness):
// a read fails with *StaleError rather than return data from a relist that
// started longer ago. It should be several relist periods plus the
// runtime's worst List latency. It must be positive.
func WithMaxStaleness(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return positiveError("WithMaxStaleness", d)
		}
		c.maxStaleness = d
		return nil
	}
}

// WithStatusTimeout bounds each status call made to confirm a mutation
// (default 30s). It must be positive.
func WithStatusTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return positiveError("WithStatusTimeout", d)
		}
		c.statusTimeout = d
		return nil
	}
}

// WithClock sets the clock for relist ticks, ages and back-off (default the
// real clock). Tests pass k8s.io/utils/clock/testing's fake clock. It must
// not be nil.
func WithClock(clk clock.WithTicker) Option {
	return func(c *config) error {
		if isNil(clk) {
			return &ConfigError{Option: "WithClock", Reason: "clock is nil"}
		}
		c.clock = clk
		return nil
	}
}

// WithLogger sets the logger (default zap.NewNop()). It must not be nil.
func WithLogger(l *zap.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return &ConfigError{Option: "WithLogger", Reason: "logger is nil"}
		}
		c.logger = l
		return nil
	}
}

func positiveError(option string, d time.Duration) *ConfigError {
	return &ConfigError{Option: option, Reason: fmt.Sprintf("duration %v is not positive", d)}
}

// isNil reports whether x is nil or an interface holding a nil pointer,
// map, channel or func, whose methods would panic in the view's goroutines,
// where the caller could not recover.
func isNil(x any) bool {
	if x == nil {
		return true
	}
	switch v := reflect.ValueOf(x); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Slice, reflect.Interface:
		return v.IsNil()
	}
	return false
}
