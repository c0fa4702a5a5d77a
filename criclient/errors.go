package criclient

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrClosed is returned by every call made after Close.
	ErrClosed = errors.New("criclient: client is closed")

	// ErrTimeout is matched (errors.Is) by a call that failed because the
	// per-call timeout set by this client expired. The caller's own context
	// deadline does not match it: a caller can tell "the runtime is slow"
	// from "I gave up".
	ErrTimeout = errors.New("criclient: per-call timeout expired")

	// ErrInvalidResponse is wrapped when the runtime answered without an
	// error but the answer is unusable (for example an empty sandbox ID).
	ErrInvalidResponse = errors.New("criclient: invalid runtime response")
)

// ConfigError is a Dial parameter or option that cannot be used: a bad
// endpoint (Option "endpoint" or "WithImageEndpoint") or a bad option value.
type ConfigError struct {
	Option string // the option or parameter, e.g. "WithTimeout"
	Reason string // what is wrong with it
}

// Error returns "criclient: Option: reason".
func (e *ConfigError) Error() string { return fmt.Sprintf("criclient: %s: %s", e.Option, e.Reason) }

// ArgError is a bad argument to a method: a nil ctx, or a method called on
// a Client that Dial did not return.
type ArgError struct {
	Method string // e.g. "ListContainers"
	Arg    string // e.g. "ctx"
	Reason string
}

// Error returns "criclient: Method: arg reason".
func (e *ArgError) Error() string {
	return fmt.Sprintf("criclient: %s: %s %s", e.Method, e.Arg, e.Reason)
}

var (
	_ error = (*ConfigError)(nil)
	_ error = (*ArgError)(nil)
)

// CallError is the error returned by every failed CRI call. It names the
// method and keeps the underlying error, so that errors.Is, errors.As and
// status.Code(err) keep working:
//
//	if status.Code(err) == codes.NotFound { ... }
//	var ce *criclient.CallError
//	if errors.As(err, &ce) { log(ce.Method) }
type CallError struct {
	// Method is the CRI method name, for example "RunPodSandbox".
	Method string
	// Err is the underlying error: a gRPC status error, a context error
	// (the caller's context ended while the call waited for admission),
	// ErrClosed or an ErrInvalidResponse.
	Err error

	timedOut bool
}

// Error implements error.
func (e *CallError) Error() string {
	if e.timedOut {
		return fmt.Sprintf("criclient: %s: per-call timeout expired: %v", e.Method, e.Err)
	}
	return fmt.Sprintf("criclient: %s: %v", e.Method, e.Err)
}

var _ error = (*CallError)(nil)

// Unwrap returns the underlying error.
func (e *CallError) Unwrap() error { return e.Err }

// Is reports whether the error matches ErrTimeout.
func (e *CallError) Is(target error) bool {
	return target == ErrTimeout && e.timedOut
}

// Timeout reports whether the call failed because the per-call timeout set by
// this client expired.
func (e *CallError) Timeout() bool { return e.timedOut }

// GRPCStatus returns the gRPC status of the underlying error, so that
// status.Code and status.FromError see the runtime's code (and not
// codes.Unknown) through the wrapping. Context errors map to
// codes.Canceled / codes.DeadlineExceeded; ErrClosed maps to codes.Canceled.
func (e *CallError) GRPCStatus() *status.Status {
	if s, ok := status.FromError(e.Err); ok {
		return s
	}
	switch {
	case errors.Is(e.Err, context.Canceled), errors.Is(e.Err, context.DeadlineExceeded):
		return status.FromContextError(e.Err)
	case errors.Is(e.Err, ErrClosed):
		return status.New(codes.Canceled, e.Err.Error())
	}
	return status.New(codes.Unknown, e.Err.Error())
}
