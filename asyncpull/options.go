package asyncpull

import (
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/backoff"
	"github.com/syncpod/syncpod/internal/typednil"
)

// Defaults. QPS and burst are the kubelet's registryPullQPS/registryBurst; back-off is the
// kubelet's image pull back-off.
const (
	// DefaultMaxParallel is the node-wide PullImage limit (containerd downloads 3 at once).
	DefaultMaxParallel = 3
	// DefaultQPS is the token bucket's rate.
	DefaultQPS = 5.0
	// DefaultBurst is the token bucket's size.
	DefaultBurst = 10
	// DefaultBackOffInitial is the first back-off delay.
	DefaultBackOffInitial = 10 * time.Second
	// DefaultBackOffMax caps the back-off delay.
	DefaultBackOffMax = 300 * time.Second
	// DefaultPresentTTL is how long a known-present image is trusted.
	DefaultPresentTTL = 5 * time.Minute
)

// CredentialPolicy says whether credentials separate pulls.
type CredentialPolicy int

const (
	// SeparateCredentials (default): requests with different credentials never share a pull,
	// a back-off or a result, and an image this scheduler pulled with credentials A is pulled
	// again (verifying the credentials, cheap: layers are cached) before it satisfies an
	// IfNotPresent request with credentials B. Anonymous pulls satisfy everyone; images present
	// before the scheduler pulled them (pre-loaded) satisfy everyone, like the kubelet.
	SeparateCredentials CredentialPolicy = iota
	// ShareCredentials: requests for one image share a pull whatever their credentials (the
	// first requester's are used), as the kubelet did before KEP-2535.
	ShareCredentials
)

type config struct {
	clock         clock.Clock
	logger        *zap.Logger
	observer      func(Event)
	notify        func(types.UID)
	policy        QueuePolicy
	credentials   CredentialPolicy
	maxParallel   int
	perRegistry   int
	registryLimit map[string]int
	qps           float64
	burst         int
	largeSize     int64
	largeSlots    int
	pullTimeout   time.Duration
	backOffInit   time.Duration
	backOffMax    time.Duration
	presentTTL    time.Duration
	err           *ConfigError // the first option that could not be applied
}

func (c *config) fail(option, reason string) {
	if c.err == nil {
		c.err = &ConfigError{Option: option, Reason: reason}
	}
}

// validate refuses the option values New cannot use.
func (c *config) validate() error {
	neg := func(option string, v any) error {
		return &ConfigError{Option: option, Reason: fmt.Sprintf("%v is negative", v)}
	}
	switch {
	case c.err != nil:
		return c.err
	case c.maxParallel < 0:
		return neg("WithMaxParallel", c.maxParallel)
	case c.perRegistry < 0:
		return neg("WithMaxParallelPerRegistry", c.perRegistry)
	case c.qps < 0:
		return neg("WithQPS", c.qps)
	case c.qps > 0 && c.burst < 1:
		return &ConfigError{Option: "WithQPS", Reason: fmt.Sprintf("burst %d is below 1", c.burst)}
	case c.largeSize < 0:
		return neg("WithLargeImageLimit", c.largeSize)
	case c.largeSize > 0 && c.largeSlots < 1:
		return &ConfigError{Option: "WithLargeImageLimit", Reason: fmt.Sprintf("slots %d is below 1", c.largeSlots)}
	case c.pullTimeout < 0:
		return neg("WithPullTimeout", c.pullTimeout)
	case c.credentials != SeparateCredentials && c.credentials != ShareCredentials:
		return &ConfigError{Option: "WithCredentialPolicy", Reason: fmt.Sprintf("unknown policy %d", c.credentials)}
	case c.presentTTL < 0:
		return neg("WithPresentTTL", c.presentTTL)
	}
	for domain, n := range c.registryLimit {
		if n < 0 {
			return &ConfigError{Option: "WithRegistryLimit", Reason: fmt.Sprintf("%s: %d is negative", domain, n)}
		}
	}
	if err := (backoff.Policy{Initial: c.backOffInit, Max: c.backOffMax}).Validate(); err != nil {
		return &ConfigError{Option: "WithBackOff", Reason: err.Error()}
	}
	return nil
}

func defaultConfig() config {
	return config{
		clock:       clock.RealClock{},
		logger:      zap.NewNop(),
		policy:      FIFOPolicy{},
		maxParallel: DefaultMaxParallel,
		qps:         DefaultQPS,
		burst:       DefaultBurst,
		backOffInit: DefaultBackOffInitial,
		backOffMax:  DefaultBackOffMax,
		presentTTL:  DefaultPresentTTL,
	}
}

// Option configures a Scheduler.
type Option func(*config)

// WithClock sets the clock used for QPS, back-off, aging, deadlines and timestamps. A nil or
// typed-nil clock is refused.
func WithClock(c clock.Clock) Option {
	return func(o *config) {
		if c == nil || typednil.Is(c) {
			o.fail("WithClock", "must not be nil")
			return
		}
		o.clock = c
	}
}

// WithLogger sets the logger (default, and for nil: no-op). Credentials are never logged; they appear as a
// short keyed-hash fingerprint ("cred" field).
func WithLogger(l *zap.Logger) Option {
	return func(o *config) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithObserver sets a hook called with every Event. It is called outside the scheduler's lock
// from the goroutine where the event happened (possibly Ensure's caller), so it must be fast
// and must not block; feed metrics from it.
func WithObserver(f func(Event)) Option { return func(o *config) { o.observer = f } }

// WithNotify sets a callback that wakes a pod's worker when a result for that pod is ready or
// an image back-off the pod met has ended (the pod should call Ensure again). Calls come from
// one scheduler goroutine, in order, outside locks. They are coalesced per pod ("pod is dirty"
// set): a slow callback delays later calls but never blocks the scheduler and never loses a
// wake-up — a completion or expiry that happens while the pod is already marked (or being
// called back) produces another call afterwards.
func WithNotify(f func(podUID types.UID)) Option { return func(o *config) { o.notify = f } }

// WithQueuePolicy sets the order of queued pulls (default FIFOPolicy). A nil or typed-nil
// policy is refused.
func WithQueuePolicy(p QueuePolicy) Option {
	return func(o *config) {
		if p == nil || typednil.Is(p) {
			o.fail("WithQueuePolicy", "must not be nil")
			return
		}
		o.policy = p
	}
}

// WithCredentialPolicy sets whether credentials separate pulls (default SeparateCredentials).
func WithCredentialPolicy(p CredentialPolicy) Option { return func(o *config) { o.credentials = p } }

// WithMaxParallel limits PullImage calls in flight node-wide (default DefaultMaxParallel).
// 1 reproduces the kubelet's serial puller; 0 means unlimited; negative is refused.
func WithMaxParallel(n int) Option { return func(o *config) { o.maxParallel = n } }

// WithMaxParallelPerRegistry limits PullImage calls in flight per registry domain
// (default unlimited; 0 means unlimited; negative is refused).
func WithMaxParallelPerRegistry(n int) Option { return func(o *config) { o.perRegistry = n } }

// WithRegistryLimit overrides the per-registry limit for one registry domain ("docker.io",
// "ghcr.io", "127.0.0.1:5000"); 0 means unlimited; negative or an empty domain is refused.
func WithRegistryLimit(domain string, n int) Option {
	return func(o *config) {
		if domain == "" {
			o.fail("WithRegistryLimit", "domain must not be empty")
			return
		}
		if o.registryLimit == nil {
			o.registryLimit = map[string]int{}
		}
		o.registryLimit[domain] = n
	}
}

// WithQPS sets the token bucket that paces PullImage calls (default 5/s, burst 10). A pull over
// the rate waits in the queue; it is never rejected. qps 0 disables pacing (burst is then
// ignored); a negative qps, or a burst below 1 with pacing on, is refused.
func WithQPS(qps float64, burst int) Option {
	return func(o *config) {
		o.qps = qps
		o.burst = burst
	}
}

// WithLargeImageLimit keeps huge images from holding every slot: pulls whose SizeHint is at
// least threshold bytes may hold at most slots of the MaxParallel slots at a time; other pulls
// overtake them. threshold 0 disables the limit; a negative threshold, or slots below 1 with a
// threshold, is refused.
func WithLargeImageLimit(threshold int64, slots int) Option {
	return func(o *config) {
		o.largeSize = threshold
		o.largeSlots = slots
	}
}

// WithPullTimeout cancels a PullImage call that runs longer than d (scheduler clock); the
// result is ErrTimeout and counts as a failure for back-off. 0 (default) means no deadline,
// like the kubelet; negative is refused.
func WithPullTimeout(d time.Duration) Option { return func(o *config) { o.pullTimeout = d } }

// WithBackOff sets the pull back-off per (image, credentials): initial, doubling up to max
// (default 10s to 300s). A success resets it; entries idle for 2*max are dropped. initial must
// be positive and maxDelay at least initial.
func WithBackOff(initial, maxDelay time.Duration) Option {
	return func(o *config) {
		o.backOffInit, o.backOffMax = initial, maxDelay
	}
}

// WithPresentTTL sets how long a known-present image is trusted without asking the runtime
// again (default 5m). 0 asks the runtime (ImageStatus, asynchronously) on every IfNotPresent
// or Never request that has no fresher answer; negative is refused.
func WithPresentTTL(d time.Duration) Option { return func(o *config) { o.presentTTL = d } }

// EventKind says what an Event reports.
type EventKind int

const (
	// EventDedupe: a request joined a pull already queued or running (Waiters is the new count).
	EventDedupe EventKind = iota + 1
	// EventQueued: a pull entered the queue.
	EventQueued
	// EventPullStarted: PullImage was called; QueueWait is the time since the first request.
	EventPullStarted
	// EventPullFinished: PullImage returned; Duration, Size (0 if unknown) and Err are set.
	EventPullFinished
	// EventBackOff: a failure put the image in back-off for BackOff.
	EventBackOff
	// EventCanceled: a queued or running pull was dropped because nobody waits for it.
	EventCanceled
	// EventPresent: the image was found present without pulling.
	EventPresent
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case EventDedupe:
		return "Dedupe"
	case EventQueued:
		return "Queued"
	case EventPullStarted:
		return "PullStarted"
	case EventPullFinished:
		return "PullFinished"
	case EventBackOff:
		return "BackOff"
	case EventCanceled:
		return "Canceled"
	case EventPresent:
		return "Present"
	}
	return "Unknown"
}

// Event is what the observer hook receives. It never carries credentials.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Image is the normalised reference.
	Image string
	// Registry is the reference's domain.
	Registry string
	// Waiters is the number of pods waiting for the pull.
	Waiters int
	// QueueWait is the time from the first request to PullImage (EventPullStarted).
	QueueWait time.Duration
	// Duration is how long PullImage took (EventPullFinished).
	Duration time.Duration
	// Size is the image size in bytes as the runtime reports it, 0 if unknown.
	Size uint64
	// BackOff is the new back-off delay (EventBackOff).
	BackOff time.Duration
	// Err is the pull error (EventPullFinished, EventBackOff), nil on success.
	Err error
}
