package podworkers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Syncer is the work done for a pod, one phase per method. Workers calls at
// most one method of a pod at a time, from one of its goroutines and
// outside its locks, so a Syncer may call back into the Workers (Wake,
// Update, Phase). The pod passed is the last one given to Update; the
// Syncer must not modify it. Every call's ctx is cancelled by Close; a
// SyncPod's ctx is also cancelled by a kill of its pod, and a
// SyncTerminatingPod's by a kill with a shorter grace period (the call is
// then made again with it).
type Syncer interface {
	// SyncPod moves the pod towards its desired state. update says why it
	// runs (UpdateCreate for the pod's first call). A Result with Terminal
	// set moves the pod to terminating; an error is retried after the
	// pod's back-off.
	SyncPod(ctx context.Context, update UpdateType, pod *corev1.Pod) (Result, error)
	// SyncTerminatingPod stops the pod's containers within gracePeriod. It
	// is retried, after the pod's back-off, until it returns nil.
	SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, gracePeriod time.Duration) error
	// SyncTerminatedPod cleans up after the pod's containers stopped
	// (volumes, cgroups, status). It is retried, after the pod's back-off,
	// until it returns nil; the pod is then finished.
	SyncTerminatedPod(ctx context.Context, pod *corev1.Pod) error
	// SyncTerminatingRuntimePod stops a pod found on the runtime that no
	// Update made known (an orphan). It is retried, after the pod's
	// back-off, until it returns nil; the pod is then finished.
	SyncTerminatingRuntimePod(ctx context.Context, pod RuntimePod, gracePeriod time.Duration) error
}

// Result is what a successful SyncPod tells its worker.
type Result struct {
	// Terminal reports that the pod reached a terminal phase (Succeeded or
	// Failed): the worker moves it to terminating by itself.
	Terminal bool
	// RequeueAfter, when positive, asks for another SyncPod after that long
	// if nothing wakes the pod first; it replaces the resync interval for
	// this wait.
	RequeueAfter time.Duration
}

// RuntimePod names a pod found on the runtime (its sandbox's metadata).
type RuntimePod struct {
	UID       types.UID
	Namespace string
	Name      string
}

// UpdateType says why a pod is updated or synced.
type UpdateType int

const (
	// UpdateCreate: the pod is new. It is what the first SyncPod of a pod
	// receives, whatever the first Update's type.
	UpdateCreate UpdateType = iota + 1
	// UpdateUpdate: the pod's desired state changed.
	UpdateUpdate
	// UpdateSync: nothing in the pod changed; sync it again (a wake, a
	// resync, a requeue).
	UpdateSync
	// UpdateKill: terminate the pod (deleted, evicted, or an orphan).
	UpdateKill
)

// String returns the type's name.
func (t UpdateType) String() string {
	switch t {
	case UpdateCreate:
		return "Create"
	case UpdateUpdate:
		return "Update"
	case UpdateSync:
		return "Sync"
	case UpdateKill:
		return "Kill"
	}
	return "Unknown"
}

// rank orders the types a pending SyncPod coalesces: the strongest reason wins.
func (t UpdateType) rank() int {
	switch t {
	case UpdateSync:
		return 1
	case UpdateUpdate:
		return 2
	case UpdateCreate:
		return 3
	}
	return 0
}

// PodUpdate is one call of Workers.Update.
type PodUpdate struct {
	// Type is why the pod is updated; it must be one of the UpdateType
	// constants.
	Type UpdateType
	// Pod is the desired pod. It is required, except for an UpdateKill of
	// an orphan, which sets RuntimePod instead.
	Pod *corev1.Pod
	// RuntimePod names an orphan to kill (Type UpdateKill, Pod nil). If its
	// UID is a known pod, the kill applies to that pod.
	RuntimePod *RuntimePod
	// GracePeriod, when set with UpdateKill, overrides the pod's grace
	// period; it must not be negative. Without it a kill uses the pod's
	// DeletionGracePeriodSeconds, else Spec.TerminationGracePeriodSeconds,
	// else DefaultGracePeriod.
	GracePeriod *time.Duration
}

// Phase is where a pod is in its life.
type Phase int

const (
	// PhaseUnknown: no Update made the pod known, or it was forgotten.
	PhaseUnknown Phase = iota
	// PhaseSyncing: SyncPod runs for the pod.
	PhaseSyncing
	// PhaseTerminating: the pod was killed or reached a terminal phase;
	// SyncTerminatingPod (or SyncTerminatingRuntimePod) runs until it
	// succeeds.
	PhaseTerminating
	// PhaseTerminated: the pod's containers stopped; SyncTerminatedPod runs
	// until it succeeds.
	PhaseTerminated
	// PhaseFinished: nothing more runs for the pod; Forget drops its record.
	PhaseFinished
)

// String returns the phase's name.
func (p Phase) String() string {
	switch p {
	case PhaseUnknown:
		return "Unknown"
	case PhaseSyncing:
		return "Syncing"
	case PhaseTerminating:
		return "Terminating"
	case PhaseTerminated:
		return "Terminated"
	case PhaseFinished:
		return "Finished"
	}
	return "Invalid"
}

// EventKind says what an Event reports.
type EventKind int

const (
	// EventCall: a Syncer call returned; Phase is the phase it ran in,
	// Orphan tells SyncTerminatingRuntimePod from SyncTerminatingPod, and
	// Duration and Err are set.
	EventCall EventKind = iota + 1
	// EventBackOff: the failed call is retried after Delay unless the pod is
	// woken or updated first.
	EventBackOff
	// EventTerminating: the pod moved to PhaseTerminating (a kill, or
	// SyncPod reported a terminal phase).
	EventTerminating
	// EventFinished: the pod finished.
	EventFinished
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case EventCall:
		return "Call"
	case EventBackOff:
		return "BackOff"
	case EventTerminating:
		return "Terminating"
	case EventFinished:
		return "Finished"
	}
	return "Unknown"
}

// Event is what the observer receives.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// UID is the pod's UID.
	UID types.UID
	// Phase is the phase the call ran in (EventCall, EventBackOff).
	Phase Phase
	// Orphan is set for a pod killed as a RuntimePod.
	Orphan bool
	// Duration is how long the call took (EventCall).
	Duration time.Duration
	// Delay is the back-off before the retry (EventBackOff).
	Delay time.Duration
	// Err is the call's error (EventCall, EventBackOff).
	Err error
}

// Stats is a snapshot of a Workers.
type Stats struct {
	// Pods is the number of pods with a record, finished ones included.
	Pods int
	// Terminating counts pods in PhaseTerminating or PhaseTerminated.
	Terminating int
	// Finished counts pods in PhaseFinished (waiting for Forget).
	Finished int
	// Queued counts pods ready for a call and waiting for a goroutine.
	Queued int
	// Running counts Syncer calls in flight, each until what follows it
	// is done: its next call queued or its timer armed, and its events
	// given to the observer. Queued == 0 and Running == 0 means nothing
	// happens until an Update, a Wake or the clock.
	Running int
	// Goroutines is the number of goroutines the Workers holds now.
	Goroutines int
	// Calls counts the Syncer calls made so far; Failures those that
	// returned an error.
	Calls, Failures uint64
}
