package pleg

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

var (
	// ErrClosed is returned by Start, RequestRelist, Healthy, Subscribe,
	// WaitContainerState and WaitContainerRemoved after Close (a wait
	// already blocked returns it too).
	ErrClosed = errors.New("pleg: closed")
	// ErrRemoved is wrapped by the error WaitContainerState returns when
	// the container was removed before the PLEG saw it in the state waited
	// for: it will never be.
	ErrRemoved = errors.New("pleg: container removed")
	// ErrOverflow ends a Subscription whose buffer was full when an event
	// had to be delivered to it.
	ErrOverflow = errors.New("pleg: subscriber fell behind, events lost")
	// ErrAlreadyStarted is returned by a second Start.
	ErrAlreadyStarted = errors.New("pleg: already started")
	// ErrNeverSucceeded is wrapped by the HealthError returned before the
	// runtime ever answered.
	ErrNeverSucceeded = errors.New("pleg has yet to be successful")
	// ErrInactive is wrapped by the HealthError returned when the runtime
	// has not answered within the threshold.
	ErrInactive = errors.New("pleg is not active")
)

// The error types, checked at compile time.
var (
	_ error = (*ConfigError)(nil)
	_ error = (*ArgError)(nil)
	_ error = (*HealthError)(nil)
	_ error = (*InspectError)(nil)
	_ error = (*RelistError)(nil)
	_ error = (*removedError)(nil)
)

// ConfigError is returned by New for a nil or typed-nil dependency or an
// invalid option value.
type ConfigError struct {
	// Option names the parameter ("rt", "cache") or option.
	Option string
	// Reason says what is wrong with it.
	Reason string
}

// Error returns "pleg: Option: Reason".
func (e *ConfigError) Error() string {
	return "pleg: " + e.Option + ": " + e.Reason
}

// ArgError is a bad argument to a method: a nil ctx, an empty pod UID, or
// a receiver not made by New (Arg "PLEG") or Subscribe (Arg "Subscription").
type ArgError struct {
	// Method is the method called.
	Method string
	// Arg names the argument.
	Arg string
	// Reason says what is wrong with it.
	Reason string
}

// Error returns "pleg: Method: Arg Reason".
func (e *ArgError) Error() string {
	return "pleg: " + e.Method + ": " + e.Arg + " " + e.Reason
}

// errNotNew is what a PLEG not made by New answers: an *ArgError, as for
// any other receiver that cannot be used, saying what to do instead.
func errNotNew(method string) error {
	return &ArgError{Method: method, Arg: "PLEG", Reason: "is not initialized: use New"}
}

// removedError says which container was removed before the PLEG saw it in
// which state (it may have been in it between two relists).
type removedError struct {
	uid  types.UID
	id   string
	want string
}

func (e *removedError) Error() string {
	return fmt.Sprintf("pleg: container %q of pod %q was removed before the PLEG saw it %s", e.id, e.uid, e.want)
}

// Unwrap returns ErrRemoved.
func (e *removedError) Unwrap() error { return ErrRemoved }

// HealthError is the error Healthy returns when the PLEG is unhealthy.
// errors.Is(err, ErrNeverSucceeded) or errors.Is(err, ErrInactive) tells
// which case it is.
type HealthError struct {
	// Mode is the PLEG's mode when Healthy was called.
	Mode Mode
	// LastActive is the last time the runtime answered (zero if never).
	LastActive time.Time
	// Since is how long ago that was (zero if never).
	Since time.Duration
	// Threshold is the configured health threshold.
	Threshold time.Duration
	// RelistErr is the error of the last failed relist or probe since the
	// last success, if any.
	RelistErr error
	// StreamErr is the last event stream error while the stream is down,
	// if any.
	StreamErr error
	// EventStream says whether the event stream is enabled.
	EventStream bool

	never bool
}

// Error describes the failure.
func (e *HealthError) Error() string {
	var msg string
	if e.never {
		msg = ErrNeverSucceeded.Error()
	} else {
		msg = fmt.Sprintf("pleg was last seen active %v ago; threshold is %v", e.Since.Round(time.Millisecond), e.Threshold)
	}
	msg += " (mode " + e.Mode.String()
	if e.EventStream {
		if e.StreamErr != nil {
			msg += fmt.Sprintf("; event stream down: %v", e.StreamErr)
		} else if e.Mode == ModeEvented {
			msg += "; event stream up but no event or probe answered"
		}
	}
	if e.RelistErr != nil {
		msg += fmt.Sprintf("; relists failing: %v", e.RelistErr)
	}
	return msg + ")"
}

// Unwrap returns ErrNeverSucceeded or ErrInactive.
func (e *HealthError) Unwrap() error {
	if e.never {
		return ErrNeverSucceeded
	}
	return ErrInactive
}

// InspectError is the error the PLEG caches for a pod whose status
// inspection failed. The pod is inspected again at the next relist.
type InspectError struct {
	// UID is the pod.
	UID types.UID
	// Method is the CRI method that failed.
	Method string
	// ID is the sandbox or container id the call was about.
	ID string
	// Err is the runtime's error.
	Err error
}

// Error describes the failure.
func (e *InspectError) Error() string {
	return fmt.Sprintf("pleg: inspect pod %q: %s(%q): %v", e.UID, e.Method, e.ID, e.Err)
}

// Unwrap returns the runtime's error.
func (e *InspectError) Unwrap() error { return e.Err }

// RelistError is the error of a failed relist: listing failed.
type RelistError struct {
	// Method is the CRI method that failed (ListPodSandbox, ListContainers).
	Method string
	// Err is the runtime's error.
	Err error
}

// Error describes the failure.
func (e *RelistError) Error() string {
	return fmt.Sprintf("pleg: relist: %s: %v", e.Method, e.Err)
}

// Unwrap returns the runtime's error.
func (e *RelistError) Unwrap() error { return e.Err }
