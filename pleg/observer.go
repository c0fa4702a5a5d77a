package pleg

import (
	"sync"
	"time"
)

// ObservationKind says what an Observation reports.
type ObservationKind string

const (
	// ObservedModeChange: the PLEG went from one mode to another (From,
	// To); Err is the stream error for a fall back to relisting.
	ObservedModeChange ObservationKind = "ModeChanged"
	// ObservedDrop: Dropped did not fit in the Watch channel; a PodSync
	// for its pod will be delivered instead.
	ObservedDrop ObservationKind = "EventDropped"
	// ObservedRelist: a relist (full, pod or probe) finished (Relist).
	ObservedRelist ObservationKind = "Relisted"
	// ObservedStreamError: the event stream failed with Err; the PLEG
	// reconnects after RetryIn.
	ObservedStreamError ObservationKind = "StreamError"
)

// Observation is what the observer set with WithObserver is told. It is
// called synchronously, outside the PLEG's locks, from the goroutine that
// did the work, one call at a time and in order: a slow observer slows the
// PLEG and no queue grows behind it. It must not call Close.
type Observation struct {
	// Kind says which of the fields below are set.
	Kind ObservationKind
	// From and To are the modes of an ObservedModeChange.
	From, To Mode
	// Err is the cause of an ObservedModeChange or ObservedStreamError.
	Err error
	// RetryIn is the reconnect delay of an ObservedStreamError.
	RetryIn time.Duration
	// Dropped is the event of an ObservedDrop.
	Dropped Event
	// Relist is the result of an ObservedRelist.
	Relist RelistResult
}

// RelistKind says what a RelistResult is about.
type RelistKind string

const (
	// RelistFull lists every sandbox and container.
	RelistFull RelistKind = "full"
	// RelistPods relists a few pods (RequestRelist, events without statuses,
	// retries of failed inspections in evented mode).
	RelistPods RelistKind = "pods"
	// RelistProbe is the evented mode's proof of life: one ListPodSandbox.
	RelistProbe RelistKind = "probe"
)

// RelistResult describes one finished relist.
type RelistResult struct {
	// Kind of relist.
	Kind RelistKind
	// Start is the relist timestamp (taken before listing).
	Start time.Time
	// Duration is how long it took.
	Duration time.Duration
	// Inspected is how many pods were inspected, Failed how many of those
	// inspections failed.
	Inspected, Failed int
	// Events is how many events it produced.
	Events int
	// Err is the listing error, if the relist failed.
	Err error
}

// notifier holds the observations decided under the PLEG's lock until the
// goroutine that decided them releases it and calls drain. Every poster
// drains before going on with its work, so the queue holds at most what
// the goroutines at work have just decided.
type notifier struct {
	mu    sync.Mutex
	queue []Observation
	call  sync.Mutex // one observer call at a time, in order
}

func (n *notifier) post(o Observation) {
	n.mu.Lock()
	n.queue = append(n.queue, o)
	n.mu.Unlock()
}

func (n *notifier) drain(observe func(Observation)) {
	n.call.Lock()
	defer n.call.Unlock()
	for {
		n.mu.Lock()
		q := n.queue
		n.queue = nil
		n.mu.Unlock()
		if len(q) == 0 {
			return
		}
		for _, o := range q {
			observe(o)
		}
	}
}
