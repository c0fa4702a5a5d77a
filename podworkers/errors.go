package podworkers

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by the methods of a closed Workers.
	ErrClosed = errors.New("podworkers: closed")
	// ErrFinished is returned by Update for a pod that has finished
	// terminating: a UID never comes back to life until Forget drops it.
	ErrFinished = errors.New("podworkers: pod has finished")
	// ErrNotFinished is returned by Forget for a pod still being synced or
	// terminated.
	ErrNotFinished = errors.New("podworkers: pod has not finished")
)

// ConfigError is a constructor parameter or option that cannot be used.
type ConfigError struct {
	Option string // e.g. "WithMaxParallel", or "syncer" for New's Syncer
	Reason string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("podworkers: %s: %s", e.Option, e.Reason) }

// ArgError is a bad argument to a method, such as a nil pod.
type ArgError struct {
	Method string // e.g. "Update"
	Arg    string // e.g. "pod"
	Reason string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("podworkers: %s: %s %s", e.Method, e.Arg, e.Reason)
}

// errNotNew is what a Workers not made by New answers.
func errNotNew(method string) error {
	return &ArgError{Method: method, Arg: "Workers", Reason: "is not initialized: use New"}
}

var (
	_ error = (*ConfigError)(nil)
	_ error = (*ArgError)(nil)
)
