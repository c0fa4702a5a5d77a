package pleg

import (
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/backoff"
	"github.com/syncpod/syncpod/internal/typednil"
)

// Defaults, from the kubelet's constants.
const (
	// DefaultRelistPeriod is the relist period without a usable event stream.
	DefaultRelistPeriod = time.Second
	// DefaultThreshold is the health threshold: Healthy fails when the
	// runtime has not answered for longer.
	DefaultThreshold = 3 * time.Minute
	// DefaultSafetyNetPeriod is the relist period while the event stream is up.
	DefaultSafetyNetPeriod = 300 * time.Second
	// DefaultChannelCapacity is the capacity of the Watch channel.
	DefaultChannelCapacity = 1000
	// MaxChannelCapacity is the largest capacity of the Watch channel and of
	// a Subscription's buffer. Channels are allocated whole, so an
	// unbounded size would let one option exhaust memory.
	MaxChannelCapacity = 1 << 16
	// DefaultInspectParallelism bounds concurrent pod inspections in a relist.
	DefaultInspectParallelism = 8
	// DefaultRelistTimeout bounds one relist, probe or pod relist.
	DefaultRelistTimeout = 2 * time.Minute
	// DefaultReconnectInitial is the first event stream reconnect backoff
	// (jittered, doubling, never giving up).
	DefaultReconnectInitial = 200 * time.Millisecond
	// DefaultReconnectMax caps the event stream reconnect backoff.
	DefaultReconnectMax = 30 * time.Second
	// DefaultTombstoneTTL is how long removed container and sandbox ids are
	// remembered, so that late events about them (containerd queues events
	// for 5 min) are ignored rather than reported again.
	DefaultTombstoneTTL = 10 * time.Minute
)

type config struct {
	period, threshold, safetyNet, probe time.Duration
	capacity, parallelism               int
	timeout                             time.Duration
	reconnectInitial, reconnectMax      time.Duration
	events, changed                     bool
	clock                               clock.Clock
	logger                              *zap.Logger
	observer                            func(Observation)
}

// Option configures a PLEG.
type Option func(*config)

// WithRelistPeriod sets how often the PLEG relists without a usable event
// stream (default 1 s). It must be below the threshold.
func WithRelistPeriod(d time.Duration) Option {
	return func(c *config) { c.period = d }
}

// WithThreshold sets the health threshold (default 3 min).
func WithThreshold(d time.Duration) Option {
	return func(c *config) { c.threshold = d }
}

// WithSafetyNetPeriod sets how often the PLEG relists while the event
// stream is up (default 300 s).
func WithSafetyNetPeriod(d time.Duration) Option {
	return func(c *config) { c.safetyNet = d }
}

// WithProbePeriod sets how often the PLEG probes the runtime (one
// ListPodSandbox) while the event stream is up, to prove it still answers
// when no event flows (default threshold/3). It must be below the threshold.
func WithProbePeriod(d time.Duration) Option {
	return func(c *config) { c.probe = d }
}

// WithChannelCapacity sets the capacity of the Watch channel (default 1000,
// at most MaxChannelCapacity; 0 is an unbuffered channel, which drops every
// event no reader is waiting for, owing its pod a PodSync).
func WithChannelCapacity(n int) Option {
	return func(c *config) { c.capacity = n }
}

// WithInspectParallelism bounds how many pods a relist inspects at once
// (default 8; 1 inspects serially like the kubelet; 0 means unlimited: every
// changed pod is inspected at once, so a relist after many pods changed sends
// the runtime that many status calls together).
func WithInspectParallelism(n int) Option {
	return func(c *config) { c.parallelism = n }
}

// WithRelistTimeout bounds one relist, probe or pod relist (default 2 min).
func WithRelistTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// WithBackOff sets the event stream reconnect back-off: the first wait is
// about initial, each failure doubles it up to max, each wait is jittered
// by ±20%. It never gives up. initial must be positive and max at least
// initial.
func WithBackOff(initial, max time.Duration) Option {
	return func(c *config) { c.reconnectInitial, c.reconnectMax = initial, max }
}

// WithEventStream enables (default) or disables the runtime event stream.
// Disabled, the PLEG is a pure relisting PLEG like the kubelet's generic one.
func WithEventStream(enabled bool) Option {
	return func(c *config) { c.events = enabled }
}

// WithChangedEvents makes the PLEG deliver ContainerChanged events, which
// the kubelet computes but never sends.
func WithChangedEvents(enabled bool) Option {
	return func(c *config) { c.changed = enabled }
}

// WithClock sets the clock (default the real clock). Tests pass
// k8s.io/utils/clock/testing's fake clock.
func WithClock(clk clock.Clock) Option {
	return func(c *config) { c.clock = clk }
}

// WithLogger sets the logger (default zap.NewNop()).
func WithLogger(l *zap.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithObserver sets the observer of mode changes, dropped events, relists
// and stream errors (see Observation). A nil func observes nothing.
func WithObserver(o func(Observation)) Option {
	return func(c *config) { c.observer = o }
}

func newConfig(opts []Option) (config, error) {
	c := config{
		period:           DefaultRelistPeriod,
		threshold:        DefaultThreshold,
		safetyNet:        DefaultSafetyNetPeriod,
		capacity:         DefaultChannelCapacity,
		parallelism:      DefaultInspectParallelism,
		timeout:          DefaultRelistTimeout,
		reconnectInitial: DefaultReconnectInitial,
		reconnectMax:     DefaultReconnectMax,
		events:           true,
		clock:            clock.RealClock{},
		logger:           zap.NewNop(),
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.probe == 0 {
		c.probe = c.threshold / 3
	}
	switch {
	case c.threshold <= 0:
		return c, &ConfigError{Option: "WithThreshold", Reason: "must be > 0"}
	case c.period <= 0 || c.period >= c.threshold:
		return c, &ConfigError{Option: "WithRelistPeriod", Reason: "must be > 0 and below the threshold"}
	case c.safetyNet <= 0:
		return c, &ConfigError{Option: "WithSafetyNetPeriod", Reason: "must be > 0"}
	case c.probe <= 0 || c.probe >= c.threshold:
		return c, &ConfigError{Option: "WithProbePeriod", Reason: "must be > 0 and below the threshold"}
	case c.capacity < 0 || c.capacity > MaxChannelCapacity:
		return c, &ConfigError{Option: "WithChannelCapacity", Reason: "must be >= 0 and at most MaxChannelCapacity"}
	case c.parallelism < 0:
		return c, &ConfigError{Option: "WithInspectParallelism", Reason: "must be >= 0"}
	case c.timeout <= 0:
		return c, &ConfigError{Option: "WithRelistTimeout", Reason: "must be > 0"}
	case typednil.Is(c.clock):
		return c, &ConfigError{Option: "WithClock", Reason: "must not be nil"}
	}
	if err := (backoff.Policy{Initial: c.reconnectInitial, Max: c.reconnectMax}).Validate(); err != nil {
		return c, &ConfigError{Option: "WithBackOff", Reason: err.Error()}
	}
	if c.logger == nil {
		c.logger = zap.NewNop()
	}
	if c.observer == nil {
		c.observer = func(Observation) {}
	}
	return c, nil
}

// inspectLimit is the errgroup limit for inspections: a negative limit is
// errgroup's "no limit", which is what a parallelism of 0 means.
func (c config) inspectLimit() int {
	if c.parallelism == 0 {
		return -1
	}
	return c.parallelism
}
