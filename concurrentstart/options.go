package concurrentstart

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"
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

type config struct {
	maxParallel int
	policy      FailurePolicy
	clock       clock.PassiveClock
	onStarted   func(name string, at time.Time)
	onFinished  func(Result)
	err         error
}

// Option configures a Plan.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

func (c *config) fail(option, reason string) {
	if c.err == nil {
		c.err = &InvalidOptionError{Option: option, Reason: reason}
	}
}

// WithMaxParallel bounds how many Start functions run at the same time, across
// the whole run. It does not bound Ready or Complete functions: those wait
// for something (a probe, an exit) rather than do work, and holding a slot
// while waiting would let one slow init container throttle everything else.
// n must be at least 1. The default is no bound.
func WithMaxParallel(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.fail("WithMaxParallel", fmt.Sprintf("bound must be at least 1, got %d", n))
			return
		}
		c.maxParallel = n
	})
}

// WithFailurePolicy sets what happens when a node fails. The default is
// ContinueIndependent.
func WithFailurePolicy(p FailurePolicy) Option {
	return optionFunc(func(c *config) {
		if p != ContinueIndependent && p != FailFast {
			c.fail("WithFailurePolicy", "unknown policy "+p.String())
			return
		}
		c.policy = p
	})
}

// WithClock sets the clock used for Result.StartTime and Result.EndTime.
// The default is the real clock.
func WithClock(clk clock.PassiveClock) Option {
	return optionFunc(func(c *config) {
		if clk == nil {
			c.fail("WithClock", "nil clock")
			return
		}
		c.clock = clk
	})
}

// WithOnNodeStarted sets a hook called just before a node's Start function,
// with the node's StartTime. It is called from the node's goroutine, so it
// may run concurrently with other hooks; it must be safe for concurrent use
// and fast. It is never called after Run returns.
func WithOnNodeStarted(fn func(name string, at time.Time)) Option {
	return optionFunc(func(c *config) { c.onStarted = fn })
}

// WithOnNodeFinished sets a hook called once per node per run with its final
// Result: for nodes that ran, from the node's goroutine; for nodes skipped or
// canceled before they started, from the goroutine calling Run. It may run
// concurrently with other hooks; it must be safe for concurrent use and fast.
// It is never called after Run returns.
func WithOnNodeFinished(fn func(Result)) Option {
	return optionFunc(func(c *config) { c.onFinished = fn })
}
