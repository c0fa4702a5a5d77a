package crisim

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors, for errors.Is on errors returned in-process (the
// Runtime's methods and ExitContainer). Over gRPC only the status code
// survives; each sentinel maps to the code named in its comment.
var (
	// ErrNotFound: an unknown sandbox, container or image (codes.NotFound).
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a sandbox or container name already reserved (codes.AlreadyExists).
	ErrAlreadyExists = errors.New("already exists")
	// ErrInvalidArgument: a malformed request (codes.InvalidArgument).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrFailedPrecondition: the object is in the wrong state (codes.FailedPrecondition).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrUnauthenticated: a pull without the credentials its registry
	// image needs, see WithRegistryAuth (codes.Unauthenticated).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrClosed: the runtime was closed (codes.Unavailable).
	ErrClosed = errors.New("runtime closed")
	// ErrInjected: a failure injected by SetErrorRate or CutEventStreamsAfter
	// (code as configured; FailNext returns the caller's own error).
	ErrInjected = errors.New("injected failure")
)

// Error is the error crisim returns: it carries a gRPC code (so
// status.Code(err) and a gRPC client see it), the CRI method, and a sentinel
// for errors.Is.
type Error struct {
	Code   codes.Code // the gRPC status code the call returns
	Method string     // the CRI method, e.g. "StartContainer"
	Kind   error      // a sentinel above, or the context error for abandoned calls
	Msg    string     // what went wrong, with the ids involved
}

var _ error = (*Error)(nil)

// ConfigError reports an option New or Start cannot use.
type ConfigError struct {
	// Option is the option's name, e.g. "WithMaxConcurrency".
	Option string
	// Reason says what is wrong with its value.
	Reason string
}

// Error formats the error as "crisim: Option: reason".
func (e *ConfigError) Error() string { return "crisim: " + e.Option + ": " + e.Reason }

// ArgError is a bad argument to a method of the Runtime other than the CRI
// calls (a nil ctx, a negative count or duration), or a method called on a
// Runtime that New or Start did not make (Arg "Runtime"). The CRI methods
// report a bad request as an *Error with ErrInvalidArgument instead, which
// keeps its gRPC code over the wire.
type ArgError struct {
	// Method is the method called, e.g. "FailNext".
	Method string
	// Arg names the argument, or "Runtime" for the receiver.
	Arg string
	// Reason says what is wrong with it.
	Reason string
}

// Error formats the error as "crisim: Method: Arg Reason".
func (e *ArgError) Error() string { return "crisim: " + e.Method + ": " + e.Arg + " " + e.Reason }

// GRPCStatus makes a gRPC server answer an *ArgError with
// codes.FailedPrecondition when the Runtime was not made by New, and
// codes.InvalidArgument otherwise.
func (e *ArgError) GRPCStatus() *status.Status {
	if e.Arg == "Runtime" {
		return status.New(codes.FailedPrecondition, e.Error())
	}
	return status.New(codes.InvalidArgument, e.Error())
}

var (
	_ error = (*ConfigError)(nil)
	_ error = (*ArgError)(nil)
)

// errNotNew is what a Runtime not made by New or Start answers.
func errNotNew(method string) error {
	return &ArgError{Method: method, Arg: "Runtime", Reason: "is not initialized: use New or Start"}
}

// Error formats the method, the kind and the message.
func (e *Error) Error() string {
	return fmt.Sprintf("crisim %s: %s: %s", e.Method, e.Kind, e.Msg)
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Kind }

// GRPCStatus makes status.FromError and the gRPC server keep Code.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Error()) }

func newError(method string, kind error, code codes.Code, format string, args ...any) *Error {
	return &Error{Code: code, Method: method, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

func errNotFound(method, format string, args ...any) error {
	return newError(method, ErrNotFound, codes.NotFound, format, args...)
}

func errInvalid(method, format string, args ...any) error {
	return newError(method, ErrInvalidArgument, codes.InvalidArgument, format, args...)
}

func errExists(method, format string, args ...any) error {
	return newError(method, ErrAlreadyExists, codes.AlreadyExists, format, args...)
}

func errPrecondition(method, format string, args ...any) error {
	return newError(method, ErrFailedPrecondition, codes.FailedPrecondition, format, args...)
}

func errClosed(method string) error {
	return newError(method, ErrClosed, codes.Unavailable, "the runtime is closed")
}

// contextError converts a context error into the gRPC status a server
// returns for it (Canceled or DeadlineExceeded), keeping the cause.
func contextError(method string, err error) error {
	st := status.FromContextError(err)
	return &Error{Code: st.Code(), Method: method, Kind: err, Msg: "call abandoned"}
}
