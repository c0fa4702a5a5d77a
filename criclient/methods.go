package criclient

import (
	"sync/atomic"
	"time"
)

// Class is an admission class: calls of one class share one token bucket and
// one in-flight bound, so a burst in one class cannot starve another.
type Class int

const (
	// ClassRead holds calls that only read runtime state: Version, Status,
	// RuntimeConfig, List*, *Status, *Stats, ImageFsInfo, and the calls that
	// only prepare a stream or run a probe command (ExecSync, Exec, Attach,
	// PortForward), because health checks depend on them.
	ClassRead Class = iota
	// ClassMutating holds calls that change runtime state: Run/Stop/Remove
	// PodSandbox, Create/Start/Stop/Remove Container, Update*, Checkpoint*,
	// RestorePod, ReopenContainerLog, UpdateRuntimeConfig and RemoveImage.
	//
	// With WithListSnapshots, a mutation drops the snapshots whose answer it
	// can change: sandbox calls (RunPodSandbox, UpdatePodSandboxResources)
	// the sandbox list, container calls (Create/Start/Stop/Remove,
	// UpdateContainerResources, ReopenContainerLog, CheckpointContainer) the
	// container list, and StopPodSandbox, RemovePodSandbox, RestorePod,
	// CheckpointPod and UpdateRuntimeConfig both. RemoveImage changes
	// neither list. A RunPodSandbox burst therefore leaves the container
	// snapshot in place.
	ClassMutating
	// ClassImagePull holds PullImage.
	ClassImagePull

	numClasses = 3
)

// String returns "read", "mutating" or "image-pull".
func (c Class) String() string {
	switch c {
	case ClassRead:
		return "read"
	case ClassMutating:
		return "mutating"
	case ClassImagePull:
		return "image-pull"
	}
	return "unknown"
}

func (c Class) valid() bool { return c >= 0 && c < numClasses }

// Default timeouts, the kubelet's: a 2 minute runtime request timeout,
// RunPodSandbox twice that, no timeout for PullImage and GetContainerEvents.
const (
	DefaultTimeout              = 2 * time.Minute
	DefaultRunPodSandboxTimeout = 2 * DefaultTimeout
	// DefaultMaxMessageSize is the gRPC send and receive message limit, as in
	// the kubelet (16 MiB).
	DefaultMaxMessageSize = 16 << 20
)

// timeoutKind says how a method's default timeout follows WithTimeout.
type timeoutKind int

const (
	timeoutBase   timeoutKind = iota // the base request timeout
	timeoutDouble                    // twice the base (RunPodSandbox)
	timeoutNone                      // no timeout (PullImage, GetContainerEvents)
)

// invalidation says which List snapshots a mutation can change.
type invalidation uint8

const (
	invSandboxes  invalidation = 1 << iota // the ListPodSandbox answer
	invContainers                          // the ListContainers answer
	invBoth       = invSandboxes | invContainers
)

type methodSpec struct {
	class   Class
	timeout timeoutKind
	// invalidates lists the snapshots the call drops when it returns.
	invalidates invalidation
}

// methodSpecs lists every CRI method of cri-api's RuntimeService and
// ImageManagerService the client implements.
var methodSpecs = map[string]methodSpec{
	// RuntimeService: reads
	"Version":               {class: ClassRead},
	"Status":                {class: ClassRead},
	"RuntimeConfig":         {class: ClassRead},
	"ListPodSandbox":        {class: ClassRead},
	"PodSandboxStatus":      {class: ClassRead},
	"ListContainers":        {class: ClassRead},
	"ContainerStatus":       {class: ClassRead},
	"ContainerStats":        {class: ClassRead},
	"ListContainerStats":    {class: ClassRead},
	"PodSandboxStats":       {class: ClassRead},
	"ListPodSandboxStats":   {class: ClassRead},
	"ListMetricDescriptors": {class: ClassRead},
	"ListPodSandboxMetrics": {class: ClassRead},
	"ExecSync":              {class: ClassRead},
	"Exec":                  {class: ClassRead},
	"Attach":                {class: ClassRead},
	"PortForward":           {class: ClassRead},
	"GetContainerEvents":    {class: ClassRead, timeout: timeoutNone}, // a stream: no admission, no observer
	// RuntimeService: mutations
	"RunPodSandbox":             {class: ClassMutating, timeout: timeoutDouble, invalidates: invSandboxes},
	"StopPodSandbox":            {class: ClassMutating, invalidates: invBoth},
	"RemovePodSandbox":          {class: ClassMutating, invalidates: invBoth},
	"UpdatePodSandboxResources": {class: ClassMutating, invalidates: invSandboxes},
	"CheckpointPod":             {class: ClassMutating, invalidates: invBoth},
	"RestorePod":                {class: ClassMutating, invalidates: invBoth},
	"CreateContainer":           {class: ClassMutating, invalidates: invContainers},
	"StartContainer":            {class: ClassMutating, invalidates: invContainers},
	"StopContainer":             {class: ClassMutating, invalidates: invContainers},
	"RemoveContainer":           {class: ClassMutating, invalidates: invContainers},
	"UpdateContainerResources":  {class: ClassMutating, invalidates: invContainers},
	"ReopenContainerLog":        {class: ClassMutating, invalidates: invContainers},
	"CheckpointContainer":       {class: ClassMutating, invalidates: invContainers},
	"UpdateRuntimeConfig":       {class: ClassMutating, invalidates: invBoth},
	// ImageManagerService
	"ListImages":  {class: ClassRead},
	"ImageStatus": {class: ClassRead},
	"ImageFsInfo": {class: ClassRead},
	"PullImage":   {class: ClassImagePull, timeout: timeoutNone},
	"RemoveImage": {class: ClassMutating},
}

// method is the per-client runtime state of one CRI method.
type method struct {
	name        string
	class       Class
	invalidates invalidation
	timeout     time.Duration // 0: none
	inFlight    atomic.Int64
}

// MethodClass returns the admission class of a CRI method name, and false
// for a name the client does not know.
func MethodClass(name string) (Class, bool) {
	s, ok := methodSpecs[name]
	return s.class, ok
}
