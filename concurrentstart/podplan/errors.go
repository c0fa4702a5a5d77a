package podplan

import (
	"fmt"

	"github.com/syncpod/syncpod/concurrentstart"
)

// Every error Build returns matches concurrentstart.ErrInvalidPlan with
// errors.Is; the executor's own typed errors (*concurrentstart.CycleError for
// an ordering cycle, *concurrentstart.DuplicateNodeError for two containers
// with one name, ...) come through unchanged for errors.As, with container
// names as node names.

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
// contradictory or impossible.
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
	_ error = (*AnnotationError)(nil)
	_ error = (*UnknownContainerError)(nil)
	_ error = (*OrderingError)(nil)
	_ error = (*StateError)(nil)
	_ error = (*MissingFuncError)(nil)
)
