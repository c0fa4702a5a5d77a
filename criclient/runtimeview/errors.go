package runtimeview

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrClosed is returned by reads after Close and ends every
	// subscription when the view closes.
	ErrClosed = errors.New("runtimeview: view is closed")

	// ErrOverflow ends a subscription whose buffer was full when an event
	// had to be delivered. The subscriber has lost that event and must
	// resubscribe and relist; no later event is delivered to it, so it can
	// never act on a stream with a silent gap.
	ErrOverflow = errors.New("runtimeview: subscriber buffer overflowed, events lost")

	// ErrUpstreamLost ends every subscription when the runtime's event
	// stream breaks (the runtime restarted or stopped answering): events of
	// the gap are unknown, so subscribers must resubscribe and relist.
	ErrUpstreamLost = errors.New("runtimeview: runtime event stream lost")
)

var (
	_ error = (*StaleError)(nil)
	_ error = (*ConfigError)(nil)
	_ error = (*ArgError)(nil)
	_ error = (*contextError)(nil)
)

// ConfigError is returned by New for a nil Source or an option given an
// invalid value. Nothing was started.
type ConfigError struct {
	// Option names the parameter or option ("src", "WithRelistPeriod").
	Option string
	// Reason says what is wrong with its value.
	Reason string
}

// Error returns "runtimeview: Option: Reason".
func (e *ConfigError) Error() string {
	return "runtimeview: " + e.Option + ": " + e.Reason
}

// ArgError is a bad argument to a method, such as a nil context.
type ArgError struct {
	// Method is the method called.
	Method string
	// Arg names the argument.
	Arg string
	// Reason says what is wrong with it.
	Reason string
}

// Error returns "runtimeview: Method: Arg Reason".
func (e *ArgError) Error() string {
	return "runtimeview: " + e.Method + ": " + e.Arg + " " + e.Reason
}

func nilCtx(method string) *ArgError {
	return &ArgError{Method: method, Arg: "ctx", Reason: "must not be nil"}
}

// StaleError is returned by reads (and Health) when the view cannot prove
// its data is within the staleness bound: the last successful relist
// started longer ago than the bound, or none has succeeded yet. LastErr is
// the error of the last failed relist, if any.
type StaleError struct {
	// Age is how old the data is (time since the last successful relist
	// started); zero when the view never synced.
	Age time.Duration
	// Bound is the configured staleness bound (WithMaxStaleness).
	Bound time.Duration
	// LastErr is why the runtime did not answer the relists, if known.
	LastErr error
}

// Error implements error.
func (e *StaleError) Error() string {
	if e.Age == 0 {
		return fmt.Sprintf("runtimeview: no successful relist yet (bound %v): %v", e.Bound, e.LastErr)
	}
	return fmt.Sprintf("runtimeview: data is %v old, bound %v; last relist error: %v", e.Age.Round(time.Millisecond), e.Bound, e.LastErr)
}

// Unwrap returns LastErr.
func (e *StaleError) Unwrap() error { return e.LastErr }

// GRPCStatus maps a stale view to codes.Unavailable, so a CRI client (the
// kubelet) treats it as a runtime that does not answer.
func (e *StaleError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

// contextError is a read or Subscribe ended by its caller's context. It
// unwraps to ctx.Err(), so errors.Is(err, context.Canceled) holds, and its
// gRPC code is the one a gRPC server gives that context error (Canceled or
// DeadlineExceeded), so a CRI server can return it as it is. detail, when
// set, says what the view was waiting for (a *StaleError before the first
// relist) and is unwrapped too.
type contextError struct {
	op     string
	err    error // ctx.Err()
	detail error
}

func newContextError(ctx context.Context, op string, detail error) *contextError {
	return &contextError{op: op, err: ctx.Err(), detail: detail}
}

// Error implements error.
func (e *contextError) Error() string {
	if e.detail != nil {
		return fmt.Sprintf("runtimeview: %s: %v (%v)", e.op, e.err, e.detail)
	}
	return fmt.Sprintf("runtimeview: %s: %v", e.op, e.err)
}

// Unwrap returns the context's error and the detail, if any.
func (e *contextError) Unwrap() []error {
	if e.detail != nil {
		return []error{e.err, e.detail}
	}
	return []error{e.err}
}

// GRPCStatus maps the context's error as gRPC does: Canceled or
// DeadlineExceeded.
func (e *contextError) GRPCStatus() *status.Status {
	return status.New(status.FromContextError(e.err).Code(), e.Error())
}
