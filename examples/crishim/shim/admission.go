package shim

import (
	"context"
	"fmt"

	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// Class is an admission class of CRI calls. Each class has its own token
// bucket and in-flight bound, so reads never queue behind mutations.
type Class int

const (
	// ClassRead: Version, Status, *Status, List* (when not answered from
	// the view), stats, ExecSync, Exec, Attach, PortForward, ImageStatus,
	// ListImages, ImageFsInfo.
	ClassRead Class = iota
	// ClassMutating: Run/Stop/Remove PodSandbox, Create/Start/Stop/Remove
	// Container, Update*, Checkpoint*, RestorePod, ReopenContainerLog,
	// UpdateRuntimeConfig, RemoveImage.
	ClassMutating
	// ClassImagePull: PullImage.
	ClassImagePull
	numClasses
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
	return fmt.Sprintf("Class(%d)", int(c))
}

// Limits is the admission control of one Class. The zero value admits
// every call at once.
type Limits struct {
	// QPS is the sustained rate (token bucket); 0 means unlimited.
	QPS float64
	// Burst is the bucket size; 0 with QPS > 0 means 1.
	Burst int
	// MaxInFlight bounds the calls of the class at the runtime at once; 0
	// means unbounded. Waiters are admitted FIFO.
	MaxInFlight int
}

// gate enforces one class's Limits: the in-flight slot first, then a
// token, so the rate governs when calls start.
type gate struct {
	slots  *semaphore.Weighted
	bucket *rate.Limiter
}

func newGate(l Limits) *gate {
	g := &gate{}
	if l.MaxInFlight > 0 {
		g.slots = semaphore.NewWeighted(int64(l.MaxInFlight))
	}
	if l.QPS > 0 {
		g.bucket = rate.NewLimiter(rate.Limit(l.QPS), max(l.Burst, 1))
	}
	return g
}

func (g *gate) acquire(ctx context.Context) (func(), error) {
	if g.slots != nil {
		if err := g.slots.Acquire(ctx, 1); err != nil {
			return nil, err
		}
	}
	if g.bucket != nil {
		if err := g.bucket.Wait(ctx); err != nil {
			if g.slots != nil {
				g.slots.Release(1)
			}
			return nil, err
		}
	}
	return func() {
		if g.slots != nil {
			g.slots.Release(1)
		}
	}, nil
}

// methodClass maps every unary CRI method to its class.
var methodClass = map[string]Class{
	"Version": ClassRead, "Status": ClassRead, "RuntimeConfig": ClassRead,
	"PodSandboxStatus": ClassRead, "ListPodSandbox": ClassRead,
	"ContainerStatus": ClassRead, "ListContainers": ClassRead,
	"ExecSync": ClassRead, "Exec": ClassRead, "Attach": ClassRead, "PortForward": ClassRead,
	"ContainerStats": ClassRead, "ListContainerStats": ClassRead,
	"PodSandboxStats": ClassRead, "ListPodSandboxStats": ClassRead,
	"ListMetricDescriptors": ClassRead, "ListPodSandboxMetrics": ClassRead,
	"ListImages": ClassRead, "ImageStatus": ClassRead, "ImageFsInfo": ClassRead,

	"RunPodSandbox": ClassMutating, "StopPodSandbox": ClassMutating, "RemovePodSandbox": ClassMutating,
	"CreateContainer": ClassMutating, "StartContainer": ClassMutating, "StopContainer": ClassMutating,
	"RemoveContainer": ClassMutating, "UpdateContainerResources": ClassMutating,
	"ReopenContainerLog": ClassMutating, "UpdateRuntimeConfig": ClassMutating,
	"CheckpointContainer": ClassMutating, "CheckpointPod": ClassMutating, "RestorePod": ClassMutating,
	"UpdatePodSandboxResources": ClassMutating, "RemoveImage": ClassMutating,

	"PullImage": ClassImagePull,
}
