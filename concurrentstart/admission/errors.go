package admission

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by Acquire after Close, and to requests that
	// were queued when Close was called.
	ErrClosed = errors.New("admission: closed")
	// ErrForgotten is returned to a pod's queued requests when Forget
	// drops the pod.
	ErrForgotten = errors.New("admission: pod forgotten")
)

// ConfigError is a constructor option or parameter that cannot be used.
type ConfigError struct {
	Option string // the option or parameter, e.g. "WithAging"
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string { return fmt.Sprintf("admission: %s: %s", e.Option, e.Reason) }

// ArgError is a bad argument to a method.
type ArgError struct {
	Method string // e.g. "Acquire"
	Arg    string // e.g. "ctx"
	Reason string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("admission: %s: %s %s", e.Method, e.Arg, e.Reason)
}
