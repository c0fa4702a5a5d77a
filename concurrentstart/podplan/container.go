package podplan

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Role is what a container is in its pod.
type Role uint8

const (
	// Init is a regular init container: it must exit 0 before anything after
	// it in the init order starts.
	Init Role = iota + 1
	// Sidecar is a restartable init container (an init container with
	// restartPolicy Always, KEP-753): it keeps running, and what follows it
	// in the init order waits for it to start, or to pass its startup check.
	Sidecar
	// Regular is a container of spec.containers.
	Regular
)

// String returns "init", "sidecar" or "regular".
func (r Role) String() string {
	switch r {
	case Init:
		return "init"
	case Sidecar:
		return "sidecar"
	case Regular:
		return "regular"
	default:
		return fmt.Sprintf("Role(%d)", uint8(r))
	}
}

// Container is what the caller's functions are given: one container of the
// pod and its place in it.
type Container struct {
	// Name is the container's name, also the name of its plan node.
	Name string
	// Role is the container's role.
	Role Role
	// Index is the container's position in spec.initContainers (Init,
	// Sidecar) or spec.containers (Regular).
	Index int
	// Spec is a deep copy of the container's spec, taken by Build.
	Spec *corev1.Container
}

// ContainerFunc acts on one container: start it, or wait for it.
type ContainerFunc func(ctx context.Context, c Container) error

// Funcs are the caller's runtime operations. Build turns them into the
// Start, Ready and Complete functions of the plan's nodes, so the plan works
// with any runtime (a CRI client, a fake, a virtual-kubelet provider).
type Funcs struct {
	// Start creates and starts the container (for a kubelet: ensure image,
	// CreateContainer, StartContainer, PostStart hook). Required.
	Start ContainerFunc
	// WaitCompleted blocks until the init container has exited: nil for
	// exit code 0, an error otherwise. Required if the plan has an init
	// container to start or wait for.
	WaitCompleted ContainerFunc
	// WaitStartup blocks until the container's startup check passes, or
	// returns an error if it fails. Optional: without it no container gates
	// on readiness.
	WaitStartup ContainerFunc
	// HasStartupCheck says whether a container has a startup check for
	// WaitStartup to wait on. Optional; the default is that the container's
	// spec has a startupProbe. Only consulted when WaitStartup is set.
	HasStartupCheck func(c Container) bool
}

func (f *Funcs) hasCheck(c Container) bool {
	if f.WaitStartup == nil {
		return false
	}
	if f.HasStartupCheck != nil {
		return f.HasStartupCheck(c)
	}
	return c.Spec.StartupProbe != nil
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
