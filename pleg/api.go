package pleg

import (
	"context"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime is the part of the CRI runtime service the PLEG uses. Its methods
// have exactly the signatures of k8s.io/cri-api/pkg/apis.RuntimeService, so
// a criclient.Client, cri-api's FakeRuntimeService and cri-client's remote
// runtime all satisfy it. The PLEG calls them from several goroutines at
// once, never under its locks, each with a context bounded by
// WithRelistTimeout (GetContainerEvents: until Close).
type Runtime interface {
	// ListPodSandbox returns the sandboxes matching filter. The PLEG passes
	// a nil filter (every sandbox): relists, pod relists and probes.
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	// ListContainers returns the containers matching filter: every
	// container (nil filter) in a full relist, one sandbox's containers
	// (PodSandboxId) in a pod relist.
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	// PodSandboxStatus returns one sandbox's status (the PLEG asks without
	// verbose info). A gRPC NotFound error means the sandbox is gone.
	PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	// ContainerStatus returns one container's status (the PLEG asks without
	// verbose info). A gRPC NotFound error means the container is gone.
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	// GetContainerEvents streams the runtime's container events into
	// containerEventsCh and calls connectionEstablishedCallback once the
	// stream is up. It must return once ctx is cancelled: the PLEG waits
	// for it on Close. A return (with an error or nil), or closing
	// containerEventsCh, ends the stream: the PLEG falls back to relisting
	// and calls it again after a backoff. A runtime without an event stream
	// may return at once: the PLEG then keeps relisting at the normal
	// period.
	GetContainerEvents(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

// Cache is the pod status cache the PLEG writes. A
// statecache.Cache[types.UID, *pleg.PodStatus] satisfies it.
//
// The PLEG calls its methods one at a time, outside its locks, in the order
// its records changed, and before it delivers the events of the same
// change on Watch(). An implementation (a statecache subscriber, say) may
// therefore call RequestRelist, Healthy, Stats and Mode; it must not call
// Close, which waits for the goroutine calling it, nor wait for the PLEG to
// write something else, which that goroutine would do next.
type Cache interface {
	// Set stores value and err for key with modified time ts and reports
	// whether it did. It must refuse (return false) when it holds an entry
	// for key modified after ts, so an older status never replaces a newer
	// one; an equal ts overwrites. err is non-nil (an *InspectError, value
	// holding only the pod's identity) when inspecting the pod failed.
	Set(key types.UID, value *PodStatus, err error, ts time.Time) bool
	// Delete removes key's entry: the pod no longer exists in the runtime.
	Delete(key types.UID)
	// UpdateTime sets the cache's global time: "every entry reflects every
	// change that happened before ts". The PLEG calls it only after a full
	// relist, after that relist's Sets and Deletes.
	UpdateTime(ts time.Time)
}

// PodStatus is the runtime's view of one pod as the PLEG last inspected it.
//
// SandboxStatuses and ContainerStatuses are sorted newest first (CreatedAt
// descending, then id), as the kubelet sorts them. Timestamp is the time the
// status is valid at: every change of the pod that happened before
// Timestamp is reflected (for a relist, the time taken before listing; for a
// runtime event, the event's CreatedAt). It equals the time the status was
// written to the Cache with. The PLEG never mutates a PodStatus after
// writing it; readers must not mutate it either.
type PodStatus struct {
	// ID is the pod UID (the sandbox metadata's uid).
	ID types.UID
	// Name and Namespace come from the sandbox metadata (or, for a pod
	// without a sandbox, from the kubelet's io.kubernetes.pod.* labels).
	Name, Namespace string
	// SandboxStatuses holds one status per sandbox of the pod.
	SandboxStatuses []*runtimeapi.PodSandboxStatus
	// ContainerStatuses holds one status per container of the pod.
	ContainerStatuses []*runtimeapi.ContainerStatus
	// Timestamp is the time this status is valid at (see above).
	Timestamp time.Time
}

// EventType is the kind of a pod lifecycle event. The values are the
// kubelet's PodLifeCycleEventType names.
type EventType string

const (
	// ContainerStarted: the container (or sandbox) is now running.
	ContainerStarted EventType = "ContainerStarted"
	// ContainerDied: the container (or sandbox) has exited. Reported
	// exactly once per container id.
	ContainerDied EventType = "ContainerDied"
	// ContainerRemoved: the container (or sandbox) no longer exists.
	ContainerRemoved EventType = "ContainerRemoved"
	// ContainerChanged: the container went to an unknown state. Like the
	// kubelet, the PLEG computes it but only delivers it with
	// WithChangedEvents.
	ContainerChanged EventType = "ContainerChanged"
	// PodSync: something about the pod changed that the watcher was not
	// told about (an event was dropped on a full channel), or the Cache
	// held an older status than the events delivered for a moment and now
	// holds the right one; re-read the pod from the Cache. Data is empty.
	PodSync EventType = "PodSync"
)

// Event is one pod lifecycle event.
type Event struct {
	// ID is the pod UID.
	ID types.UID
	// Type says what happened.
	Type EventType
	// Data is the container or sandbox id (empty for PodSync).
	Data string
}

// Mode is how the PLEG currently learns about changes.
type Mode int

const (
	// ModeRelisting: no usable event stream (disabled, not yet connected,
	// down, or not yet reconciled); the PLEG relists every relist period
	// (WithRelistPeriod).
	ModeRelisting Mode = iota
	// ModeEvented: the event stream is up and was reconciled by a full
	// relist after it connected; the PLEG relists only every safety-net
	// period (WithSafetyNetPeriod) and probes the runtime every probe period
	// (WithProbePeriod).
	ModeEvented
)

// String returns "relisting" or "evented".
func (m Mode) String() string {
	switch m {
	case ModeRelisting:
		return "relisting"
	case ModeEvented:
		return "evented"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}
