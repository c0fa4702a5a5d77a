package agent

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SandboxConfig is the PodSandboxConfig the agent sends for pod's sandbox
// attempt: metadata, the pod's labels and annotations plus the agent's own
// labels (pod UID, name, namespace, managed), node namespaces.
func SandboxConfig(pod *corev1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	return sandboxConfig(pod, attempt)
}

// ContainerConfig is the ContainerConfig the agent sends for attempt of
// container c of pod: image, command and args as given, working dir, plain
// env values, the agent's labels and annotations (hash, kind), log path.
// init says whether c is one of pod's init containers.
func ContainerConfig(pod *corev1.Pod, c *corev1.Container, init bool, attempt uint32) *runtimeapi.ContainerConfig {
	return containerConfig(pod, containerStart{spec: c, attempt: attempt, init: init, sidecar: init && isSidecar(c)})
}
