package podplan

import (
	"fmt"

	"github.com/syncpod/syncpod/concurrentstart"
)

// Build is the package's only function that fails. Every error it returns
// matches concurrentstart.ErrInvalidPlan with errors.Is and is one of:
//   - *ArgError: a bad argument to Build itself (a nil pod);
//   - *MissingFuncError: a Funcs field the pod needs is nil;
//   - *ConfigError: the pod's spec cannot be planned (an empty or
//     duplicate container name, an unknown container restartPolicy); one
//     for a duplicate name also unwraps to a
//     *concurrentstart.DuplicateNodeError;
//   - *AnnotationError, *UnknownContainerError, *OrderingError: the
//     AnnotationStartAfter annotation is malformed, names a container the
//     pod does not have, or orders containers that cannot be ordered;
//   - *UnknownContainerError, *StateError: WithRunning or WithCompleted
//     name a container the pod does not have, or states that contradict
//     each other or the container's role;
//   - the executor's own typed errors, such as *concurrentstart.CycleError
//     for an ordering cycle, with container names as node names.

// ArgError is a bad argument to a function of this package: Build's pod
// is nil.
type ArgError struct {
	Method string // the function, e.g. "Build"
	Arg    string // the argument, e.g. "pod"
	Reason string
}

// Error reads "podplan: Build: pod must not be nil".
func (e *ArgError) Error() string {
	return fmt.Sprintf("podplan: %s: %s %s", e.Method, e.Arg, e.Reason)
}

// Is reports whether target is concurrentstart.ErrInvalidPlan.
func (e *ArgError) Is(target error) bool { return target == concurrentstart.ErrInvalidPlan }

// ConfigError reports a pod spec that Build cannot plan: Option is the
// path of the offending field from Build's pod parameter, such as
// "pod.spec.initContainers[1].restartPolicy", and Reason says what is
// wrong with it.
type ConfigError struct {
	Option string
	Reason string
	// cause is an executor error the problem also is, for errors.As (a
	// *concurrentstart.DuplicateNodeError for a duplicate name).
	cause error
}

// Error reads "podplan: <field>: <reason>", e.g.
// `podplan: pod.spec.containers[1].name: "app" is also the name of pod.spec.containers[0]`.
func (e *ConfigError) Error() string { return fmt.Sprintf("podplan: %s: %s", e.Option, e.Reason) }

// Is reports whether target is concurrentstart.ErrInvalidPlan.
func (e *ConfigError) Is(target error) bool { return target == concurrentstart.ErrInvalidPlan }

// Unwrap returns the executor's error the problem also is, if any.
func (e *ConfigError) Unwrap() error { return e.cause }

// AnnotationError reports a start-order annotation that cannot be parsed.
type AnnotationError struct {
	// Container is the container whose entry is malformed; empty if the
	// annotation as a whole is not a JSON object of string lists.
	Container string
	// Entry is the malformed dependency entry, if any.
	Entry string
	// Reason says what is wrong.
	Reason string
}

// Error describes the annotation error.
func (e *AnnotationError) Error() string {
	switch {
	case e.Container == "":
		return fmt.Sprintf("podplan: annotation %s: %s", AnnotationStartAfter, e.Reason)
	case e.Entry == "":
		return fmt.Sprintf("podplan: annotation %s: container %q: %s", AnnotationStartAfter, e.Container, e.Reason)
	default:
		return fmt.Sprintf("podplan: annotation %s: container %q: entry %q: %s", AnnotationStartAfter, e.Container, e.Entry, e.Reason)
	}
}

// Is reports whether target is concurrentstart.ErrInvalidPlan.
func (e *AnnotationError) Is(target error) bool { return target == concurrentstart.ErrInvalidPlan }

// UnknownContainerError reports a container name that is not in the pod.
type UnknownContainerError struct {
	// Name is the unknown name.
	Name string
	// Source is where it came from: "annotation" (as a key or as a
	// dependency of Container), "WithRunning" or "WithCompleted".
	Source string
	// Container is the container whose annotation entry names it, if any.
	Container string
}

// Error describes the unknown container error.
func (e *UnknownContainerError) Error() string {
	if e.Container != "" {
		return fmt.Sprintf("podplan: %s: container %q depends on unknown container %q", e.Source, e.Container, e.Name)
	}
	return fmt.Sprintf("podplan: %s: unknown container %q", e.Source, e.Name)
}

// Is reports whether target is concurrentstart.ErrInvalidPlan.
func (e *UnknownContainerError) Is(target error) bool {
	return target == concurrentstart.ErrInvalidPlan
}

// OrderingError reports a start-order entry that is well-formed but not
// allowed: ordering involving an init or sidecar container, whose order the
// pod spec already fixes.
type OrderingError struct {
	// Container is the container whose entry is wrong.
	Container string
	// Dependency is the container it names (empty if the key itself is the
	// problem).
	Dependency string
	// Reason says what is wrong.
	Reason string
}

// Error describes the ordering error.
func (e *OrderingError) Error() string {
	if e.Dependency == "" {
		return fmt.Sprintf("podplan: annotation %s: container %q: %s", AnnotationStartAfter, e.Container, e.Reason)
	}
	return fmt.Sprintf("podplan: annotation %s: container %q after %q: %s", AnnotationStartAfter, e.Container, e.Dependency, e.Reason)
}

// Is reports whether target is concurrentstart.ErrInvalidPlan.
func (e *OrderingError) Is(target error) bool { return target == concurrentstart.ErrInvalidPlan }

// StateError reports a container state (WithRunning, WithCompleted) that is
// contradictory or impossible: a container both running and completed, a
// completed sidecar.
type StateError struct {
	// Container is the container concerned.
	Container string
	// Reason says what is wrong.
	Reason string
}

// Error describes the state error.
func (e *StateError) Error() string {
	if e.Container == "" {
		return "podplan: " + e.Reason
	}
	return fmt.Sprintf("podplan: container %q: %s", e.Container, e.Reason)
}

// Is reports whether target is concurrentstart.ErrInvalidPlan.
func (e *StateError) Is(target error) bool { return target == concurrentstart.ErrInvalidPlan }

// MissingFuncError reports a Funcs field the plan needs but that is nil.
type MissingFuncError struct {
	// Func is the field's name, e.g. "WaitCompleted".
	Func string
	// Container is the first container that needs it, if any.
	Container string
}

// Error describes the missing func error.
func (e *MissingFuncError) Error() string {
	if e.Container == "" {
		return fmt.Sprintf("podplan: Funcs.%s is required", e.Func)
	}
	return fmt.Sprintf("podplan: Funcs.%s is required by container %q", e.Func, e.Container)
}

// Is reports whether target is concurrentstart.ErrInvalidPlan.
func (e *MissingFuncError) Is(target error) bool { return target == concurrentstart.ErrInvalidPlan }

var (
	_ error = (*ArgError)(nil)
	_ error = (*ConfigError)(nil)
	_ error = (*AnnotationError)(nil)
	_ error = (*UnknownContainerError)(nil)
	_ error = (*OrderingError)(nil)
	_ error = (*StateError)(nil)
	_ error = (*MissingFuncError)(nil)
)
