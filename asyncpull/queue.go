package asyncpull

import "time"

// QueueItem is the read-only view of a queued pull that a QueuePolicy orders.
type QueueItem struct {
	// Image is the normalised reference.
	Image string
	// Registry is the reference's domain.
	Registry string
	// Priority is the highest Request.Priority among the pull's waiters.
	Priority int32
	// SizeHint is the largest Request.SizeHint among the waiters, 0 if unknown.
	SizeHint int64
	// Waiters is the number of pods waiting for the pull.
	Waiters int
	// Enqueued is when the first request for the pull arrived (scheduler clock).
	Enqueued time.Time
	// Seq increases with every new pull, in request arrival order; it breaks ties first-come
	// first-served.
	Seq uint64
}

// QueuePolicy orders the queue. Less is called under the scheduler's lock with the current
// time of the scheduler's clock: it must be fast, pure and must not call the Scheduler.
// Pulls that cannot start yet (per-registry or large-image limits) are skipped, not waited
// for, so a policy cannot cause head-of-line blocking by a pull that is held back.
type QueuePolicy interface {
	// Less reports whether a should start before b.
	Less(a, b QueueItem, now time.Time) bool
}

// FIFOPolicy starts pulls in arrival order.
type FIFOPolicy struct{}

var _ QueuePolicy = FIFOPolicy{}

// Less implements QueuePolicy.
func (FIFOPolicy) Less(a, b QueueItem, _ time.Time) bool { return a.Seq < b.Seq }

// PriorityPolicy starts higher Priority first, FIFO within a priority. With Aging > 0 a queued
// pull gains one priority level per Aging spent waiting, so nothing starves.
type PriorityPolicy struct {
	// Aging is the wait that is worth one priority level; 0 disables aging.
	Aging time.Duration
}

var _ QueuePolicy = PriorityPolicy{}

func (p PriorityPolicy) effective(it QueueItem, now time.Time) int64 {
	prio := int64(it.Priority)
	if p.Aging > 0 {
		if w := now.Sub(it.Enqueued); w > 0 {
			prio += int64(w / p.Aging)
		}
	}
	return prio
}

// Less implements QueuePolicy.
func (p PriorityPolicy) Less(a, b QueueItem, now time.Time) bool {
	pa, pb := p.effective(a, now), p.effective(b, now)
	if pa != pb {
		return pa > pb
	}
	return a.Seq < b.Seq
}

// SmallestFirstPolicy starts the smallest known SizeHint first; pulls of unknown size follow in
// FIFO order. With MaxWait > 0, pulls that have waited at least MaxWait go first (FIFO among
// themselves), so big images do not starve.
type SmallestFirstPolicy struct {
	// MaxWait bounds how long size ordering may delay a pull; 0 means unbounded.
	MaxWait time.Duration
}

var _ QueuePolicy = SmallestFirstPolicy{}

// Less implements QueuePolicy.
func (p SmallestFirstPolicy) Less(a, b QueueItem, now time.Time) bool {
	if p.MaxWait > 0 {
		oa, ob := now.Sub(a.Enqueued) >= p.MaxWait, now.Sub(b.Enqueued) >= p.MaxWait
		if oa != ob {
			return oa
		}
		if oa {
			return a.Seq < b.Seq
		}
	}
	ka, kb := a.SizeHint > 0, b.SizeHint > 0
	switch {
	case ka && kb && a.SizeHint != b.SizeHint:
		return a.SizeHint < b.SizeHint
	case ka != kb:
		return ka
	}
	return a.Seq < b.Seq
}
