package kubelethost

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by methods of a Kubelet after Close.
var ErrClosed = errors.New("kubelethost: closed")

// ErrUnavailable marks errors saying that a prerequisite of the kubelet is
// missing on this machine (the binary, unshare, root), as opposed to a
// kubelet that was started and failed. Start hands these to testnode.Need.
var ErrUnavailable = errors.New("kubelethost: prerequisite missing")

// ConfigError reports a constructor parameter or option that cannot be used.
type ConfigError struct {
	// Option names the parameter or option ("endpoint", "WithNodeName").
	Option string
	// Reason says what is wrong with it.
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("kubelethost: %s: %s", e.Option, e.Reason)
}

// ArgError reports a bad argument to a method.
type ArgError struct {
	// Method is the method that was called ("WriteStaticPod").
	Method string
	// Arg names the argument ("ctx", "pod").
	Arg string
	// Reason says what is wrong with it.
	Reason string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("kubelethost: %s: %s %s", e.Method, e.Arg, e.Reason)
}

// StartError reports a kubelet that was launched but did not become
// healthy: it exited, or its healthz port did not answer in time. LogTail
// holds the end of its log, which usually says why.
type StartError struct {
	// Dir is the kubelet's directory (config, log, root dir).
	Dir string
	// LogTail is the last lines of the kubelet's log.
	LogTail string
	// Err is what went wrong.
	Err error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("kubelethost: kubelet in %s did not start: %v; log tail:\n%s", e.Dir, e.Err, e.LogTail)
}

// Unwrap returns the cause.
func (e *StartError) Unwrap() error { return e.Err }
