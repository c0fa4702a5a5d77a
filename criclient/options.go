package criclient

import (
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/typednil"
)

// Option configures a Client at Dial.
type Option func(*config)

// Limits configures admission control for one Class (WithAdmission) or one
// Gate (NewGate). The zero value admits everything at once; a negative,
// NaN or infinite QPS and a negative Burst or MaxInFlight are refused.
type Limits struct {
	// QPS is the sustained rate at which calls are admitted; 0 means no rate
	// limit. A call over the rate waits (honouring its context) instead of
	// failing.
	QPS float64
	// Burst is the token bucket size: how many calls may start at once after
	// a quiet period. Ignored when QPS is 0; 0 with QPS > 0 means 1.
	Burst int
	// MaxInFlight bounds the calls of the class sent to the runtime at the
	// same time; 0 means unbounded. Waiting callers are admitted in FIFO
	// order.
	MaxInFlight int
}

type config struct {
	imageEndpoint   string
	baseTimeout     time.Duration
	methodTimeouts  map[string]time.Duration
	maxMsgSize      int
	limits          [numClasses]Limits
	snapshotMaxAge  time.Duration
	observer        func(Event)
	logger          *zap.Logger
	clock           clock.Clock
	dialOptions     []grpc.DialOption
	skipVersionDial bool
	err             *ConfigError // the first bad option
}

func defaultConfig() *config {
	return &config{
		baseTimeout:    DefaultTimeout,
		methodTimeouts: map[string]time.Duration{},
		maxMsgSize:     DefaultMaxMessageSize,
		logger:         zap.NewNop(),
		clock:          clock.RealClock{},
	}
}

func (c *config) fail(option, format string, args ...any) {
	if c.err == nil {
		c.err = &ConfigError{Option: option, Reason: fmt.Sprintf(format, args...)}
	}
}

// WithImageEndpoint sends ImageManagerService calls to a separate endpoint
// (unix:///path or a plain path). By default, or given "", they go to the
// runtime endpoint.
func WithImageEndpoint(endpoint string) Option {
	return func(c *config) { c.imageEndpoint = endpoint }
}

// WithTimeout sets the base runtime request timeout (the kubelet's
// --runtime-request-timeout, default DefaultTimeout). RunPodSandbox gets
// twice that and ExecSync its own timeout plus that, unless set with
// WithMethodTimeout; PullImage and GetContainerEvents have none.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("WithTimeout", "%v is not positive", d)
			return
		}
		c.baseTimeout = d
	}
}

// WithMethodTimeout overrides the timeout of one CRI method, named as in the
// CRI ("RunPodSandbox", "PullImage", ...). 0 means no timeout. For ExecSync
// it replaces the base added to the command's own timeout.
func WithMethodTimeout(method string, d time.Duration) Option {
	return func(c *config) {
		if _, ok := methodSpecs[method]; !ok {
			c.fail("WithMethodTimeout", "unknown CRI method %q", method)
			return
		}
		if d < 0 {
			c.fail("WithMethodTimeout", "%s: %v is negative", method, d)
			return
		}
		c.methodTimeouts[method] = d
	}
}

// WithMaxMessageSize sets the gRPC send and receive message size limit
// (default DefaultMaxMessageSize, 16 MiB).
func WithMaxMessageSize(bytes int) Option {
	return func(c *config) {
		if bytes <= 0 {
			c.fail("WithMaxMessageSize", "%d is not positive", bytes)
			return
		}
		c.maxMsgSize = bytes
	}
}

// WithAdmission sets the admission limits of one class of calls. Each class
// has its own token bucket and in-flight bound. An unknown class, a
// negative, NaN or infinite QPS and a negative Burst or MaxInFlight are a
// *ConfigError from Dial.
func WithAdmission(class Class, l Limits) Option {
	return func(c *config) {
		if !class.valid() {
			c.fail("WithAdmission", "unknown class %d", int(class))
			return
		}
		if reason := l.problem(); reason != "" {
			c.fail("WithAdmission", "%s: %s", class, reason)
			return
		}
		c.limits[class] = l
	}
}

// problem says what is wrong with l, or "" if it can be used: a negative,
// NaN or infinite QPS, a negative Burst or a negative MaxInFlight.
func (l Limits) problem() string {
	switch {
	case l.QPS < 0 || math.IsNaN(l.QPS) || math.IsInf(l.QPS, 0):
		return fmt.Sprintf("QPS %v is negative or not finite", l.QPS)
	case l.Burst < 0:
		return fmt.Sprintf("Burst %d is negative", l.Burst)
	case l.MaxInFlight < 0:
		return fmt.Sprintf("MaxInFlight %d is negative", l.MaxInFlight)
	}
	return ""
}

// WithListSnapshots serves ListPodSandbox and ListContainers from a shared
// snapshot of the runtime's unfiltered list, never older than maxAge
// (counted from the start of the runtime call that produced it) and
// refreshed in the background past maxAge/2. Concurrent refreshes are merged
// into one runtime call, filters are applied locally, and every mutation
// made through the client drops the snapshots it can change. Off by default.
// A good maxAge is the period of the most frequent lister (the kubelet's
// relist runs every second). See the package documentation for the exact
// guarantee. 0 turns snapshots off; negative is refused.
func WithListSnapshots(maxAge time.Duration) Option {
	return func(c *config) {
		if maxAge < 0 {
			c.fail("WithListSnapshots", "%v is negative", maxAge)
			return
		}
		c.snapshotMaxAge = maxAge
	}
}

// WithObserver sets a function told of every runtime call and snapshot hit
// (see Event). It is called synchronously, outside the client's locks, from
// the goroutine that made the call (a snapshot refresh's own goroutine for
// refreshes), so a slow observer slows the calls; it must be safe for
// concurrent use and must not call back into the Client. nil (the default)
// observes nothing.
func WithObserver(fn func(Event)) Option {
	return func(c *config) { c.observer = fn }
}

// WithLogger sets the logger (default, and given nil, zap.NewNop()). Every
// call is logged at debug level; registry credentials are always redacted.
func WithLogger(l *zap.Logger) Option {
	return func(c *config) {
		if l == nil {
			l = zap.NewNop()
		}
		c.logger = l
	}
}

// WithClock sets the clock used for queue waits, token buckets, latencies
// and snapshot ages (default the real clock). Tests pass a fake clock.
// gRPC deadlines always use real time.
func WithClock(clk clock.Clock) Option {
	return func(c *config) {
		if clk == nil || typednil.Is(clk) {
			c.fail("WithClock", "must not be nil")
			return
		}
		c.clock = clk
	}
}

// WithDialOptions appends gRPC dial options (interceptors, stats handlers).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOptions = append(c.dialOptions, opts...) }
}

// WithoutVersionCheck makes Dial return without calling Version. By default
// Dial checks that the runtime answers CRI v1 before returning.
func WithoutVersionCheck() Option {
	return func(c *config) { c.skipVersionDial = true }
}
