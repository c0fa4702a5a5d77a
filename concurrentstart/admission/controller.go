package admission

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/typednil"
)

// Option configures a Controller.
type Option func(*config)

type config struct {
	limiter Limiter
	aging   time.Duration
	clock   clock.PassiveClock
	err     *ConfigError
}

// WithLimiter sets the bound (default: an AIMD with its defaults).
func WithLimiter(l Limiter) Option {
	return func(c *config) {
		if l == nil || typednil.Is(l) {
			c.err = &ConfigError{Option: "WithLimiter", Reason: "must not be nil"}
			return
		}
		c.limiter = l
	}
}

// WithAging raises a waiting request's priority by one for every d it has
// waited, so that no pod starves behind a stream of higher-priority pods.
// 0 (the default) disables aging; negative is refused.
func WithAging(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.err = &ConfigError{Option: "WithAging", Reason: d.String() + " is negative"}
			return
		}
		c.aging = d
	}
}

// WithClock sets the clock grant latencies and aging are measured with.
func WithClock(clk clock.PassiveClock) Option {
	return func(c *config) {
		if clk == nil || typednil.Is(clk) {
			c.err = &ConfigError{Option: "WithClock", Reason: "must not be nil"}
			return
		}
		c.clock = clk
	}
}

// Controller grants runtime work pod by pod under an adaptive bound. Use
// New; the zero value refuses every request with an *ArgError that says so.
type Controller struct {
	cfg config

	mu      sync.Mutex
	pods    map[string]*podEntry
	queue   []*request
	held    int
	podSeq  uint64
	reqSeq  uint64
	granted uint64
	closed  bool
}

type podEntry struct {
	seq     uint64
	arrived time.Time
}

type request struct {
	pod      string
	kind     string
	arrived  time.Time // its pod's
	podSeq   uint64
	seq      uint64
	priority int
	queued   time.Time
	ready    chan struct{} // closed when decided: err nil means granted
	err      error
	grant    *Grant
}

// Grant is the right to do one piece of runtime work. Release it when the
// work ends.
type Grant struct {
	c        *Controller
	kind     string
	at       time.Time
	inFlight int
	bound    int
	once     sync.Once
}

// New returns a Controller, or a *ConfigError for a bad option.
func New(opts ...Option) (*Controller, error) {
	cfg := config{clock: clock.RealClock{}}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	if cfg.limiter == nil {
		l, err := NewAIMD(AIMDConfig{})
		if err != nil {
			return nil, err
		}
		cfg.limiter = l
	}
	return &Controller{cfg: cfg, pods: map[string]*podEntry{}}, nil
}

// Request is one piece of a pod's runtime work asking for a grant.
type Request struct {
	// Pod identifies the pod (its UID); it must not be empty. A pod's first
	// request makes its arrival.
	Pod string
	// Priority orders pods before arrival does: higher first.
	Priority int
	// Kind names the work ("StartContainer"): the Limiter compares each
	// grant's latency with earlier grants of the same kind only, since a
	// create and a start do not take the same time. Empty is one kind.
	Kind string
	// Arrived is when the pod arrived, on the Controller's clock, for a
	// worker that knows it better than its first Acquire does: pod
	// workers that start together reach Acquire in the scheduler's order,
	// not in the order the pods came. Zero is the first Acquire. Only a
	// pod's first request (since Forget) sets it.
	Arrived time.Time
}

// Acquire waits for a grant for one piece of r.Pod's work, in the order
// the package doc gives, and returns it. It fails with ctx's error when ctx
// ends first, ErrForgotten when Forget(r.Pod) is called while it waits,
// and ErrClosed after Close.
func (c *Controller) Acquire(ctx context.Context, r Request) (*Grant, error) {
	if ctx == nil {
		return nil, &ArgError{Method: "Acquire", Arg: "ctx", Reason: "must not be nil"}
	}
	if r.Pod == "" {
		return nil, &ArgError{Method: "Acquire", Arg: "r.Pod", Reason: "must not be empty"}
	}
	pod, priority := r.Pod, r.Priority
	if c == nil || c.pods == nil {
		return nil, &ArgError{Method: "Acquire", Arg: "Controller", Reason: "is not initialized: use New"}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	now := c.cfg.clock.Now()
	p, ok := c.pods[pod]
	if !ok {
		c.podSeq++
		p = &podEntry{seq: c.podSeq, arrived: r.Arrived}
		if p.arrived.IsZero() {
			p.arrived = now
		}
		c.pods[pod] = p
	}
	c.reqSeq++
	q := &request{pod: pod, kind: r.Kind, arrived: p.arrived, podSeq: p.seq, seq: c.reqSeq, priority: priority,
		queued: now, ready: make(chan struct{})}
	c.queue = append(c.queue, q)
	c.dispatchLocked()
	c.mu.Unlock()

	select {
	case <-q.ready:
		return q.grant, q.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	select {
	case <-q.ready: // decided while ctx ended: a grant is given back
		c.mu.Unlock()
		if q.err == nil {
			q.grant.giveBack()
		}
		return nil, ctx.Err()
	default:
	}
	c.removeLocked(q)
	c.mu.Unlock()
	return nil, ctx.Err()
}

// Forget drops pod's place in line: its queued requests fail with
// ErrForgotten, and its next Acquire makes it a new arrival. Call it when
// the pod is up or deleted; grants it holds stay valid.
func (c *Controller) Forget(pod string) {
	if c == nil || c.pods == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, pod)
	kept := c.queue[:0]
	for _, r := range c.queue {
		if r.pod == pod {
			r.err = ErrForgotten
			close(r.ready)
			continue
		}
		kept = append(kept, r)
	}
	clear(c.queue[len(kept):])
	c.queue = kept
}

// Close fails every queued and later Acquire with ErrClosed. Grants held
// stay valid and may be released. It is idempotent and returns nil.
func (c *Controller) Close() error {
	if c == nil || c.pods == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	for _, r := range c.queue {
		r.err = ErrClosed
		close(r.ready)
	}
	c.queue = nil
	clear(c.pods)
	return nil
}

// Stats is a Controller's state.
type Stats struct {
	Limit   int    // the Limiter's current bound
	Held    int    // grants held now
	Queued  int    // requests waiting
	Pods    int    // pods with a place in line
	Granted uint64 // grants given so far
}

// Stats returns the Controller's state now.
func (c *Controller) Stats() Stats {
	if c == nil || c.pods == nil {
		return Stats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Limit: c.limitLocked(), Held: c.held, Queued: len(c.queue), Pods: len(c.pods), Granted: c.granted}
}

// Release ends the grant's work: err is the work's outcome, from which the
// Limiter learns whether the runtime was overloaded. Later calls do
// nothing.
func (g *Grant) Release(err error) {
	if g != nil {
		g.end(&err)
	}
}

// giveBack returns a grant that was never used: the Limiter learns nothing.
func (g *Grant) giveBack() { g.end(nil) }

// end frees the grant's slot once; outcome, when set, is reported to the
// Limiter.
func (g *Grant) end(outcome *error) {
	g.once.Do(func() {
		c := g.c
		c.mu.Lock()
		defer c.mu.Unlock()
		c.held--
		if outcome != nil {
			c.cfg.limiter.Observe(Sample{Kind: g.kind, Latency: c.cfg.clock.Since(g.at), InFlight: g.inFlight, Bound: g.bound, Overload: isOverload(*outcome)})
		}
		c.dispatchLocked()
	})
}

func (c *Controller) limitLocked() int { return max(1, c.cfg.limiter.Limit()) }

// dispatchLocked grants the best queued requests while the bound allows.
func (c *Controller) dispatchLocked() {
	for len(c.queue) > 0 {
		bound := c.cfg.limiter.Limit()
		if c.held >= max(1, bound) {
			return
		}
		now := c.cfg.clock.Now()
		best := 0
		for i := 1; i < len(c.queue); i++ {
			if c.before(c.queue[i], c.queue[best], now) {
				best = i
			}
		}
		r := c.queue[best]
		c.queue = append(c.queue[:best], c.queue[best+1:]...)
		c.held++
		c.granted++
		r.grant = &Grant{c: c, kind: r.kind, at: now, inFlight: c.held, bound: bound}
		close(r.ready)
	}
}

func (c *Controller) removeLocked(r *request) {
	for i, q := range c.queue {
		if q == r {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			return
		}
	}
}

// before reports whether a is served before b.
func (c *Controller) before(a, b *request, now time.Time) bool {
	if pa, pb := c.effective(a, now), c.effective(b, now); pa != pb {
		return pa > pb
	}
	if !a.arrived.Equal(b.arrived) {
		return a.arrived.Before(b.arrived)
	}
	if a.podSeq != b.podSeq {
		return a.podSeq < b.podSeq
	}
	return a.seq < b.seq
}

func (c *Controller) effective(r *request, now time.Time) int {
	if c.cfg.aging <= 0 {
		return r.priority
	}
	return r.priority + int(now.Sub(r.queued)/c.cfg.aging)
}

// isOverload reports whether err says the runtime could not keep up.
func isOverload(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.ResourceExhausted, codes.Unavailable:
		return true
	}
	return false
}
