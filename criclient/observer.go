package criclient

import (
	"fmt"
	"time"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	// CallAdmitted: a call passed admission control and is about to be
	// sent. Event.Latency and Event.Err are zero.
	CallAdmitted EventKind = iota + 1
	// CallFinished: the runtime answered, or the call failed.
	CallFinished
	// SnapshotServed: with WithListSnapshots, a List was answered from a
	// snapshot without a runtime call; Event.Age is the snapshot's age.
	// Hits over hits plus List calls is the hit ratio.
	SnapshotServed
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case CallAdmitted:
		return "CallAdmitted"
	case CallFinished:
		return "CallFinished"
	case SnapshotServed:
		return "SnapshotServed"
	default:
		return fmt.Sprintf("EventKind(%d)", uint8(k))
	}
}

// Event is what an observer set with WithObserver is told, for metrics:
// every unary call sent to the runtime (CallAdmitted, then CallFinished)
// and every List answered from a snapshot (SnapshotServed).
// GetContainerEvents, a stream, is not observed.
type Event struct {
	// Kind is what happened.
	Kind EventKind
	// Method is the CRI method name, for example "ListContainers".
	Method string
	// Class is the method's admission class (calls only).
	Class Class
	// QueueWait is how long the call waited for admission (token bucket and
	// in-flight bound).
	QueueWait time.Duration
	// InFlight is the number of calls of this method being sent to the
	// runtime, including this one for CallAdmitted and excluding it for
	// CallFinished.
	InFlight int
	// Latency is the time from admission to the runtime's answer
	// (CallFinished only).
	Latency time.Duration
	// Err is the call's error, nil on success (CallFinished only).
	Err error
	// Age is how old the snapshot served was, counted from the start of the
	// refresh that produced it (SnapshotServed only).
	Age time.Duration
}
