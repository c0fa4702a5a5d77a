package concurrentstart

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidPlan is matched (errors.Is) by every error Validate and New
// return for the nodes: *InvalidNodeError, *DuplicateNodeError,
// *UnknownDependencyError, *InvalidDependencyError and *CycleError. A bad
// option is a *ConfigError instead, which does not match it: the graph may
// be fine.
var ErrInvalidPlan = errors.New("concurrentstart: invalid plan")

// ConfigError is an option New cannot use.
type ConfigError struct {
	Option string // the option, e.g. "WithMaxParallel"
	Reason string // what is wrong with it
}

// Error returns "concurrentstart: Option: reason".
func (e *ConfigError) Error() string {
	return fmt.Sprintf("concurrentstart: %s: %s", e.Option, e.Reason)
}

// ArgError is a bad argument to a method: a nil ctx, a nil *Plan.
type ArgError struct {
	Method string // e.g. "Run"
	Arg    string // e.g. "ctx"
	Reason string
}

// Error returns "concurrentstart: Method: arg reason".
func (e *ArgError) Error() string {
	return fmt.Sprintf("concurrentstart: %s: %s %s", e.Method, e.Arg, e.Reason)
}

// InvalidNodeError reports a node that cannot be run: an empty name or a nil
// Start function.
type InvalidNodeError struct {
	// Index is the node's position in the slice passed to New or Validate.
	Index int
	// Name is the node's name, possibly empty.
	Name string
	// Reason says what is wrong.
	Reason string
}

// Error describes the invalid node error.
func (e *InvalidNodeError) Error() string {
	return fmt.Sprintf("concurrentstart: node %d (%q): %s", e.Index, e.Name, e.Reason)
}

// Is reports whether target is ErrInvalidPlan.
func (e *InvalidNodeError) Is(target error) bool { return target == ErrInvalidPlan }

// DuplicateNodeError reports two nodes with the same name.
type DuplicateNodeError struct {
	// Name is the duplicated name.
	Name string
	// First and Second are the positions of the two nodes.
	First, Second int
}

// Error describes the duplicate node error.
func (e *DuplicateNodeError) Error() string {
	return fmt.Sprintf("concurrentstart: duplicate node %q (positions %d and %d)", e.Name, e.First, e.Second)
}

// Is reports whether target is ErrInvalidPlan.
func (e *DuplicateNodeError) Is(target error) bool { return target == ErrInvalidPlan }

// UnknownDependencyError reports an edge to a node that is not in the plan.
type UnknownDependencyError struct {
	// Node is the node declaring the edge.
	Node string
	// Dependency is the missing node's name.
	Dependency string
}

// Error describes the unknown dependency error.
func (e *UnknownDependencyError) Error() string {
	return fmt.Sprintf("concurrentstart: node %q depends on unknown node %q", e.Node, e.Dependency)
}

// Is reports whether target is ErrInvalidPlan.
func (e *UnknownDependencyError) Is(target error) bool { return target == ErrInvalidPlan }

// InvalidDependencyError reports a malformed edge: an empty node name or an
// unset or unknown Condition.
type InvalidDependencyError struct {
	// Node is the node declaring the edge.
	Node string
	// Dependency is the edge as declared.
	Dependency Dependency
	// Reason says what is wrong.
	Reason string
}

// Error describes the invalid dependency error.
func (e *InvalidDependencyError) Error() string {
	return fmt.Sprintf("concurrentstart: node %q: dependency %q: %s", e.Node, e.Dependency.String(), e.Reason)
}

// Is reports whether target is ErrInvalidPlan.
func (e *InvalidDependencyError) Is(target error) bool { return target == ErrInvalidPlan }

// CycleError reports a dependency cycle. Path starts and ends with the same
// node; each element depends on the next one.
type CycleError struct {
	// Path is the cycle, e.g. [a b c a] for a -> b -> c -> a.
	Path []string
}

// Error describes the cycle error.
func (e *CycleError) Error() string {
	quoted := make([]string, len(e.Path))
	for i, n := range e.Path {
		quoted[i] = strconv.Quote(n)
	}
	return "concurrentstart: dependency cycle: " + strings.Join(quoted, " -> ")
}

// Is reports whether target is ErrInvalidPlan.
func (e *CycleError) Is(target error) bool { return target == ErrInvalidPlan }

// NodeError is a node's failure as wrapped in a *RunError.
type NodeError struct {
	// Node is the failed node's name.
	Node string
	// Outcome is Failed or Canceled.
	Outcome Outcome
	// Phase is the condition the node was working towards when Err was
	// returned: Started for Start, Ready for Ready, Completed for Complete.
	Phase Condition
	// Err is the error the node's function returned.
	Err error
}

// Error describes the node error.
func (e *NodeError) Error() string {
	step := map[Condition]string{Started: "start", Ready: "ready check", Completed: "completion"}[e.Phase]
	if step == "" {
		step = e.Phase.String()
	}
	return fmt.Sprintf("node %q: %s %s: %v", e.Node, step, strings.ToLower(e.Outcome.String()), e.Err)
}

// Unwrap returns Err.
func (e *NodeError) Unwrap() error { return e.Err }

// RunError is returned by Plan.Run when not every node succeeded. It unwraps
// to one *NodeError per failed or canceled-in-flight node, and to the run
// context's cause when the run was canceled, so errors.Is(err,
// context.Canceled) and errors.As(err, &nodeErr) work.
type RunError struct {
	// Failed, Skipped and Canceled list node names by outcome, in plan order.
	Failed, Skipped, Canceled []string
	errs                      []error
}

// Error describes the run error.
func (e *RunError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "concurrentstart: run: %d failed, %d skipped, %d canceled", len(e.Failed), len(e.Skipped), len(e.Canceled))
	for i, err := range e.errs {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.errs)-i)
			break
		}
		b.WriteString("; ")
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap returns the node errors and, if the run was canceled, the cause.
func (e *RunError) Unwrap() []error { return e.errs }

var (
	_ error = (*InvalidNodeError)(nil)
	_ error = (*DuplicateNodeError)(nil)
	_ error = (*UnknownDependencyError)(nil)
	_ error = (*InvalidDependencyError)(nil)
	_ error = (*CycleError)(nil)
	_ error = (*ConfigError)(nil)
	_ error = (*ArgError)(nil)
	_ error = (*NodeError)(nil)
	_ error = (*RunError)(nil)
	_ error = (*failFastCause)(nil)
)
