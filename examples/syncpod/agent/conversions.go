package agent

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
)

// SandboxConfig is the PodSandboxConfig the agent sends for pod's sandbox
// attempt: podcri.SandboxConfig with the node's network namespace
// (podcri.WithNodeNetwork), plus the agent's label syncpod.io/managed.
// pod must not be nil.
func SandboxConfig(pod *corev1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	return sandboxConfig(pod, attempt, podcri.WithNodeNetwork())
}

// ContainerConfig is the ContainerConfig the agent sends for attempt of
// container c of pod: podcri.ContainerConfig with the sandbox's namespaces
// and no log path, plus the agent's label syncpod.io/managed and
// annotations syncpod.io/container-hash and syncpod.io/container-kind, and
// the per-container annotations "<key>.<container>" of the pod. init says
// whether c is one of pod's init containers. It mounts no volume (the
// agent adds the pod's volume mounts, set up under WithPodDir, and the
// termination-message file). Its errors are
// podcri.ContainerConfig's (*podcri.ArgError, *podcri.EnvError).
func ContainerConfig(pod *corev1.Pod, c *corev1.Container, init bool, attempt uint32) (*runtimeapi.ContainerConfig, error) {
	return containerConfig(pod, containerStart{spec: c, attempt: attempt, init: init, sidecar: init && podcri.IsSidecar(c)}, false)
}
