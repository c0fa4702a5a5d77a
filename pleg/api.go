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
// runtime all satisfy it.
//
// GetContainerEvents must return once ctx is cancelled; the PLEG waits for it
// on Stop. A runtime without an event stream may return an error (or nil)
// at once: the PLEG then keeps relisting at the normal period.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	GetContainerEvents(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

// Cache is the pod status cache the PLEG writes. A
// statecache.Cache[types.UID, *pleg.PodStatus] satisfies it.
//
// Set stores value and err for key with modified time ts and reports whether
// it did: an implementation refuses (returns false) when it holds an entry
// modified after ts. UpdateTime sets the cache's global time: "every entry
// reflects every change that happened before ts".
type Cache interface {
	Set(key types.UID, value *PodStatus, err error, ts time.Time) bool
	Delete(key types.UID)
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
	// told about (an event was dropped on a full channel); re-read the pod
	// from the Cache. Data is empty.
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
	// down, or not yet reconciled); the PLEG relists every RelistPeriod.
	ModeRelisting Mode = iota
	// ModeEvented: the event stream is up and was reconciled by a full
	// relist after it connected; the PLEG relists only every
	// SafetyNetPeriod and probes the runtime every ProbePeriod.
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
