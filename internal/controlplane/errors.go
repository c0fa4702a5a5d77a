package controlplane

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by methods of a ControlPlane after Close.
var ErrClosed = errors.New("controlplane: closed")

// ErrUnavailable marks errors saying that a prerequisite is missing on this
// machine (a binary), as opposed to a control plane that was started and
// failed. Start hands these to testnode.Need.
var ErrUnavailable = errors.New("controlplane: prerequisite missing")

// ConfigError reports an option that cannot be used.
type ConfigError struct {
	// Option names the option ("WithStartTimeout").
	Option string
	// Reason says what is wrong with it.
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("controlplane: %s: %s", e.Option, e.Reason)
}

// StartError reports a process that was launched but did not become
// ready: it exited, or did not answer in time. LogTail holds the end of its
// log, which usually says why.
type StartError struct {
	// Process is "etcd", "kube-apiserver" or "kube-controller-manager".
	Process string
	// Dir is the control plane's directory.
	Dir string
	// LogTail is the last lines of the process's log.
	LogTail string
	// Err is what went wrong.
	Err error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("controlplane: %s in %s did not start: %v; log tail:\n%s", e.Process, e.Dir, e.Err, e.LogTail)
}

// Unwrap returns the cause.
func (e *StartError) Unwrap() error { return e.Err }

// StatusError is an API server answer other than 200 OK to GetJSON.
type StatusError struct {
	// Path is the path asked for.
	Path string
	// Code is the HTTP status code (404 for an object that does not exist).
	Code int
	// Body is the start of the answer (the API server's Status object).
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("controlplane: GET %s: %d: %s", e.Path, e.Code, e.Body)
}
