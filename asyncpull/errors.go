package asyncpull

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Every error in a Result wraps exactly one of the class sentinels below
// (ErrNotFound ... ErrPullFailed) or one of the request/lifecycle sentinels, so callers can
// branch with errors.Is, and it also wraps the runtime's original error.
var (
	// ErrClosed is returned by every call made after Close.
	ErrClosed = errors.New("asyncpull: scheduler closed")
	// ErrInvalidRequest reports a Request that cannot be served (unknown pull policy, negative
	// size hint ...). It is wrapped by *RequestError.
	ErrInvalidRequest = errors.New("asyncpull: invalid request")
	// ErrInvalidImageName reports an image reference that does not parse. No runtime call was made.
	ErrInvalidImageName = errors.New("asyncpull: invalid image name")
	// ErrNeverPull reports an absent image requested with PullNever.
	ErrNeverPull = errors.New("asyncpull: image not present and pull policy is Never")
	// ErrInspect reports a failed ImageStatus call.
	ErrInspect = errors.New("asyncpull: image inspect failed")

	// ErrNotFound classifies a pull of a reference the registry does not have.
	ErrNotFound = errors.New("asyncpull: image not found")
	// ErrUnauthorized classifies a pull refused for missing or wrong credentials.
	ErrUnauthorized = errors.New("asyncpull: unauthorized")
	// ErrRegistryUnavailable classifies a pull that could not reach the registry.
	ErrRegistryUnavailable = errors.New("asyncpull: registry unavailable")
	// ErrTimeout classifies a pull that exceeded its deadline (WithPullTimeout or the runtime's).
	ErrTimeout = errors.New("asyncpull: pull timed out")
	// ErrCanceled classifies a pull cancelled because every waiter went away (or Cancel, Close).
	ErrCanceled = errors.New("asyncpull: pull canceled")
	// ErrPullFailed classifies any other pull failure.
	ErrPullFailed = errors.New("asyncpull: pull failed")
)

// PullError is the error of a failed pull. Use errors.Is with a class sentinel (ErrNotFound,
// ErrUnauthorized, ...) or errors.As to get the image; Unwrap also exposes the runtime's error,
// so status.FromError and errors.Is(err, context.DeadlineExceeded) keep working.
type PullError struct {
	// Image is the normalised reference that failed.
	Image string
	// Class is one of the class sentinels (ErrNotFound, ErrUnauthorized, ErrRegistryUnavailable,
	// ErrTimeout, ErrCanceled, ErrPullFailed).
	Class error
	// Err is the runtime's error.
	Err error
}

// Error implements error.
func (e *PullError) Error() string {
	return fmt.Sprintf("pull %s: %v: %v", e.Image, e.Class, e.Err)
}

// Unwrap returns the class sentinel and the runtime's error.
func (e *PullError) Unwrap() []error { return []error{e.Class, e.Err} }

// RequestError reports bad input. It wraps ErrInvalidRequest or ErrInvalidImageName and the
// parser's error, if any.
type RequestError struct {
	// Field names the offending Request field.
	Field string
	// Value is the offending value (never a credential).
	Value string
	// Err is ErrInvalidRequest or ErrInvalidImageName, possibly joined with a parser error.
	Err error
}

// Error implements error.
func (e *RequestError) Error() string {
	return fmt.Sprintf("%s %q: %v", e.Field, e.Value, e.Err)
}

// Unwrap returns the wrapped errors.
func (e *RequestError) Unwrap() error { return e.Err }

// errNotNew is what a Scheduler not made by New answers: an *ArgError, as in
// every package of the module.
func errNotNew(method string) error {
	return &ArgError{Method: method, Arg: "Scheduler", Reason: "is not initialized: use New"}
}

// ConfigError is a constructor parameter or option that cannot be used.
type ConfigError struct {
	Option string // e.g. "WithMaxParallel", or "images" for New's image service
	Reason string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("asyncpull: %s: %s", e.Option, e.Reason) }

// ArgError is a bad argument to a method, such as a nil context.
type ArgError struct {
	Method string // e.g. "Ensure"
	Arg    string // e.g. "ctx"
	Reason string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("asyncpull: %s: %s %s", e.Method, e.Arg, e.Reason)
}

var (
	_ error = (*ConfigError)(nil)
	_ error = (*ArgError)(nil)
	_ error = (*PullError)(nil)
	_ error = (*RequestError)(nil)
)

// classify maps a runtime error to one of the class sentinels. gRPC codes win; containerd
// reports most registry failures as codes.Unknown, so its well-known messages are recognised
// too.
func classify(err error) error {
	switch {
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	case errors.Is(err, ErrCanceled), errors.Is(err, context.Canceled):
		return ErrCanceled
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.NotFound:
			return ErrNotFound
		case codes.Unauthenticated, codes.PermissionDenied:
			return ErrUnauthorized
		case codes.Unavailable, codes.ResourceExhausted:
			return ErrRegistryUnavailable
		case codes.DeadlineExceeded:
			return ErrTimeout
		case codes.Canceled:
			return ErrCanceled
		}
	}
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "not found"), strings.Contains(msg, "manifest unknown"),
		strings.Contains(msg, "name unknown"):
		return ErrNotFound
	case strings.Contains(msg, "unauthorized"),
		strings.Contains(msg, "403 forbidden"), strings.Contains(msg, "denied"):
		return ErrUnauthorized
	case strings.Contains(msg, "connection refused"), strings.Contains(msg, "no such host"),
		strings.Contains(msg, "service unavailable"), strings.Contains(msg, "bad gateway"),
		strings.Contains(msg, "too many requests"):
		return ErrRegistryUnavailable
	case strings.Contains(msg, "i/o timeout"), strings.Contains(msg, "deadline exceeded"):
		return ErrTimeout
	}
	return ErrPullFailed
}
