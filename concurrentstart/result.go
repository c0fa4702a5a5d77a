package concurrentstart

import (
	"fmt"
	"time"
)

// Outcome is how a node's run ended.
type Outcome uint8

const (
	// Succeeded: every function of the node returned nil.
	Succeeded Outcome = iota + 1
	// Failed: a function of the node returned an error while the run was
	// not canceled.
	Failed
	// Skipped: the node was never started because a dependency it still
	// waited for failed or was skipped (ContinueIndependent), or because
	// another node failed (FailFast). Result.Cause names the failed node.
	Skipped
	// Canceled: the run was canceled (caller's context, or FailFast) before
	// the node started, or while it was in flight and its function then
	// returned an error or a later phase was due.
	Canceled
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "Succeeded"
	case Failed:
		return "Failed"
	case Skipped:
		return "Skipped"
	case Canceled:
		return "Canceled"
	default:
		return fmt.Sprintf("Outcome(%d)", uint8(o))
	}
}

// Result is one node's record of one run.
type Result struct {
	// Name is the node's name.
	Name string
	// Outcome is how the node ended.
	Outcome Outcome
	// Reached is the last condition the node reached (zero if Start never
	// returned nil).
	Reached Condition
	// Err is the error of a Failed or Canceled node: what its function
	// returned, or the context's cause for a
	// node canceled before it started. Nil otherwise.
	Err error
	// Reason says why a node was Skipped or Canceled, e.g.
	// `dependency "init-db" failed`.
	Reason string
	// Cause names the failed node that made this node Skipped (or Canceled,
	// under FailFast). Empty otherwise.
	Cause string
	// StartTime is when Start was called; zero if it never was.
	StartTime time.Time
	// EndTime is when the node reached its outcome.
	EndTime time.Time
}

// Report holds the results of one run.
type Report struct {
	// Results has one entry per node, in plan order.
	Results []Result
	index   map[string]int
}

// Result returns the result of the named node.
func (r Report) Result(name string) (Result, bool) {
	i, ok := r.index[name]
	if !ok {
		return Result{}, false
	}
	return r.Results[i], true
}

// Count returns how many nodes ended with outcome o.
func (r Report) Count(o Outcome) int {
	n := 0
	for i := range r.Results {
		if r.Results[i].Outcome == o {
			n++
		}
	}
	return n
}
