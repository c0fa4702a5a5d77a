package concurrentstart

import (
	"context"
	"fmt"
)

// Func is the signature of every function a node runs: Start, Ready and
// Complete. The context is canceled when the run is canceled (the caller's
// context is done, or another node failed under FailFast); a function should
// return promptly once it is.
type Func func(ctx context.Context) error

// Condition is a milestone in a node's life. A node passes them in order:
// Started, then Ready, then Completed. Each Dependency waits for one of them.
//
// A node without a Ready function is Ready the moment it is Started; a node
// without a Complete function is Completed the moment it is Ready. So a
// Completed edge on a node that only has a Start function waits for Start to
// return, which is what a one-shot job needs.
type Condition uint8

const (
	// Started is reached when the node's Start function returned nil
	// (for a container: created and started).
	Started Condition = iota + 1
	// Ready is reached when the node's Ready function returned nil
	// (for a container: its startup check passed).
	Ready
	// Completed is reached when the node's Complete function returned nil
	// (for a container: it exited 0).
	Completed
)

// String returns "started", "ready", "completed", or "none" for the zero value.
func (c Condition) String() string {
	switch c {
	case 0:
		return "none"
	case Started:
		return "started"
	case Ready:
		return "ready"
	case Completed:
		return "completed"
	default:
		return fmt.Sprintf("Condition(%d)", uint8(c))
	}
}

func (c Condition) valid() bool { return c >= Started && c <= Completed }

// Dependency is an edge: the node that declares it may not start before the
// node named Node has reached Condition. An edge is met at the moment the
// dependency reaches the condition; a later failure of the dependency does not
// undo it.
type Dependency struct {
	// Node is the name of the node depended on.
	Node string
	// Condition is what the dependency must reach. It must be set.
	Condition Condition
}

// String returns "name:condition".
func (d Dependency) String() string { return d.Node + ":" + d.Condition.String() }

// AfterStarted returns a dependency on node reaching Started.
func AfterStarted(node string) Dependency { return Dependency{Node: node, Condition: Started} }

// AfterReady returns a dependency on node reaching Ready.
func AfterReady(node string) Dependency { return Dependency{Node: node, Condition: Ready} }

// AfterCompleted returns a dependency on node reaching Completed.
func AfterCompleted(node string) Dependency { return Dependency{Node: node, Condition: Completed} }

// Node is one unit of work in a Plan: for a pod, one container.
type Node struct {
	// Name identifies the node; it must be non-empty and unique in the plan.
	Name string
	// DependsOn lists the edges that must be met before Start is called.
	// Listing the same node twice is allowed; the strongest condition wins.
	DependsOn []Dependency
	// Start starts the node (create + start a container). Required. Only
	// Start calls count against WithMaxParallel.
	Start Func
	// Ready, if set, is called after Start returned nil and blocks until the
	// node is ready (a startup probe passed). Optional.
	Ready Func
	// Complete, if set, is called after the node is Ready and blocks until it
	// has completed successfully (an init container exited 0); it returns an
	// error if the node completed unsuccessfully. Optional.
	Complete Func
}
