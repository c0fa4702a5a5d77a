package podworkers

import (
	"fmt"
	"runtime"
	"time"

	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/backoff"
	"github.com/syncpod/syncpod/internal/typednil"
)

// Defaults.
const (
	// DefaultBackOffInitial is the first retry delay of a failed call.
	DefaultBackOffInitial = time.Second
	// DefaultBackOffMax caps the retry delay: the kubelet's pod workers
	// retry every failure after 10 s.
	DefaultBackOffMax = 10 * time.Second
	// DefaultResyncInterval is how long after a successful SyncPod the pod
	// is synced again if nothing wakes it (the kubelet's sync frequency).
	DefaultResyncInterval = time.Minute
	// DefaultGracePeriod is the grace period of a kill when neither the
	// update nor the pod sets one.
	DefaultGracePeriod = 30 * time.Second
)

// defaultMaxParallel is 4 calls per CPU, at least 16: syncs mostly wait on
// the runtime.
func defaultMaxParallel() int { return max(16, 4*runtime.GOMAXPROCS(0)) }

type config struct {
	clock       clock.WithDelayedExecution
	observer    func(Event)
	maxParallel int
	backOffInit time.Duration
	backOffMax  time.Duration
	resync      time.Duration
	err         *ConfigError
}

func (c *config) fail(option, reason string) {
	if c.err == nil {
		c.err = &ConfigError{Option: option, Reason: reason}
	}
}

func (c *config) validate() error {
	switch {
	case c.err != nil:
		return c.err
	case c.maxParallel < 0:
		return &ConfigError{Option: "WithMaxParallel", Reason: fmt.Sprintf("%d is negative", c.maxParallel)}
	case c.resync < 0:
		return &ConfigError{Option: "WithResyncInterval", Reason: fmt.Sprintf("%v is negative", c.resync)}
	}
	if err := (backoff.Policy{Initial: c.backOffInit, Max: c.backOffMax}).Validate(); err != nil {
		return &ConfigError{Option: "WithBackOff", Reason: err.Error()}
	}
	return nil
}

// Option configures a Workers.
type Option func(*config)

// WithMaxParallel limits the Syncer calls in flight, and so the goroutines
// the Workers holds, to n; 0 means unlimited (one goroutine per ready pod);
// negative is refused. The default is 4 per CPU (GOMAXPROCS), at least 16.
func WithMaxParallel(n int) Option { return func(c *config) { c.maxParallel = n } }

// WithBackOff sets the retry delay of a failed call per pod: initial,
// doubling up to maxDelay, reset by a successful call and forgotten after
// 2*maxDelay without a failure (default 1 s to 10 s). initial must be
// positive and maxDelay at least initial.
func WithBackOff(initial, maxDelay time.Duration) Option {
	return func(c *config) { c.backOffInit, c.backOffMax = initial, maxDelay }
}

// WithResyncInterval sets how long after a successful SyncPod the pod is
// synced again if nothing wakes it (default DefaultResyncInterval). 0
// disables the resync: the pod is synced again only when updated, woken or
// asked by Result.RequeueAfter. Negative is refused.
func WithResyncInterval(d time.Duration) Option { return func(c *config) { c.resync = d } }

// WithClock sets the clock of back-offs and resyncs (default the real
// clock). A nil or typed-nil clock is refused.
func WithClock(clk clock.WithDelayedExecution) Option {
	return func(c *config) {
		if typednil.Is(clk) {
			c.fail("WithClock", "must not be nil")
			return
		}
		c.clock = clk
	}
}

// WithObserver sets a hook called with every Event, synchronously, outside
// the Workers' lock, from the goroutine that did the work (a worker, or the
// caller of Update for EventTerminating). It must be quick and must not call
// back into the Workers.
func WithObserver(f func(Event)) Option { return func(c *config) { c.observer = f } }

func newConfig(opts []Option) (config, error) {
	c := config{
		clock:       clock.RealClock{},
		maxParallel: defaultMaxParallel(),
		backOffInit: DefaultBackOffInitial,
		backOffMax:  DefaultBackOffMax,
		resync:      DefaultResyncInterval,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c, c.validate()
}
