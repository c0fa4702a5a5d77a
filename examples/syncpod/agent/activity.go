package agent

import "sync/atomic"

// activity counts the work the agent has in hand: pod-worker wakes pending
// or being handled, relists pending or running, image inspections and
// pulls a pod waits to be notified of. A sync parked in the status
// cache's GetNewerThan does not count: it waits for a relist, that is for
// time to pass. Every count is taken by whoever hands the work over, before
// the hand-over (a wake from a timer is counted inside the timer's
// callback), and given back only after the work, and the timer it arms
// for its next turn, are done, so the count never reads zero while work is
// in flight between two goroutines.
//
// Zero means the agent's own goroutines are waiting for their clock or for
// the runtime; a test on a fake clock uses it to step time only then.
type activity struct{ n atomic.Int64 }

func (a *activity) add(d int64) {
	if a != nil {
		a.n.Add(d)
	}
}

func (a *activity) idle() bool { return a == nil || a.n.Load() == 0 }
