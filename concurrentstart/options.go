package concurrentstart

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/typednil"
)

// FailurePolicy says what a run does when a node fails.
type FailurePolicy uint8

const (
	// ContinueIndependent (the default) keeps running every node that does
	// not depend on a failed one; nodes whose unmet edges lead to a failed
	// node are Skipped. This is what the kubelet does for regular containers:
	// one failed start does not stop the others.
	ContinueIndependent FailurePolicy = iota
	// FailFast stops at the first failure: nodes not yet started are Skipped
	// with the failed node as Cause, and the context of in-flight functions
	// is canceled.
	FailFast
)

// String returns the policy's name.
func (p FailurePolicy) String() string {
	switch p {
	case ContinueIndependent:
		return "ContinueIndependent"
	case FailFast:
		return "FailFast"
	default:
		return fmt.Sprintf("FailurePolicy(%d)", uint8(p))
	}
}

// Option configures a Plan. Options are applied in order; a nil Option is
// ignored.
type Option func(*config)

type config struct {
	maxParallel int // 0: unlimited
	policy      FailurePolicy
	clock       clock.PassiveClock
	observer    func(Event)
	err         *ConfigError
}

func (c *config) fail(option, reason string) {
	if c.err == nil {
		c.err = &ConfigError{Option: option, Reason: reason}
	}
}

// WithMaxParallel bounds how many Start functions run at the same time, across
// the whole run. It does not bound Ready or Complete functions: those wait
// for something (a probe, an exit) rather than do work, and holding a slot
// while waiting would let one slow init container throttle everything else.
// 0 (the default) means unlimited; negative is refused.
func WithMaxParallel(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.fail("WithMaxParallel", fmt.Sprintf("%d is negative", n))
			return
		}
		c.maxParallel = n
	}
}

// WithFailurePolicy sets what happens when a node fails. The default is
// ContinueIndependent.
func WithFailurePolicy(p FailurePolicy) Option {
	return func(c *config) {
		if p != ContinueIndependent && p != FailFast {
			c.fail("WithFailurePolicy", "unknown policy "+p.String())
			return
		}
		c.policy = p
	}
}

// WithClock sets the clock used for Result.StartTime, Result.EndTime and
// Event.Time. The default is the real clock.
func WithClock(clk clock.PassiveClock) Option {
	return func(c *config) {
		if clk == nil || typednil.Is(clk) {
			c.fail("WithClock", "must not be nil")
			return
		}
		c.clock = clk
	}
}

// WithObserver sets a function told of every node starting and finishing
// (see Event). It is called synchronously from the goroutine that did the
// work: a node's own goroutine, or for a node that never started, the
// goroutine calling Run. So calls may be concurrent, a slow observer slows
// the run, and it must not call back into the Plan's run. It is never called
// after Run returns. nil (the default) observes nothing.
func WithObserver(fn func(Event)) Option {
	return func(c *config) { c.observer = fn }
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// NodeStarted: the node's Start function is about to be called.
	NodeStarted EventKind = iota + 1
	// NodeFinished: the node has its final Result.
	NodeFinished
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case NodeStarted:
		return "NodeStarted"
	case NodeFinished:
		return "NodeFinished"
	default:
		return fmt.Sprintf("EventKind(%d)", uint8(k))
	}
}

// Event is what an observer set with WithObserver is told: one NodeStarted
// per node that starts, and one NodeFinished per node per run.
type Event struct {
	// Kind is NodeStarted or NodeFinished.
	Kind EventKind
	// Node is the node's name.
	Node string
	// Time is the node's StartTime (NodeStarted) or EndTime (NodeFinished).
	Time time.Time
	// Result is the node's final Result; set for NodeFinished only.
	Result Result
}
