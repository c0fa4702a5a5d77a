package agent

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sandboxConfig is the CRI sandbox config of pod. Pods use the node's
// network namespace: the agent sets up no CNI.
func sandboxConfig(pod *corev1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	labels := map[string]string{
		labelPodUID:       string(pod.UID),
		labelPodName:      pod.Name,
		labelPodNamespace: pod.Namespace,
		managedLabel:      "true",
	}
	for k, v := range pod.Labels {
		if _, reserved := labels[k]; !reserved {
			labels[k] = v
		}
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		Labels:      labels,
		Annotations: pod.Annotations,
		// No hostname: without a private UTS namespace runc cannot set one.
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: nodeNamespaces()},
		},
	}
}

// Per-container annotations come from pod annotations
// "<key>.<container>" where key is a container annotation such as
// crisim's "crisim.syncpod.io/exit-after": "crisim.syncpod.io/exit-after.app".
// corev1 has no per-container annotations; this keeps manifests plain pods.
func containerAnnotations(pod *corev1.Pod, name string) map[string]string {
	out := map[string]string{}
	suffix := "." + name
	for k, v := range pod.Annotations {
		if strings.HasSuffix(k, suffix) {
			out[strings.TrimSuffix(k, suffix)] = v
		}
	}
	return out
}

func containerConfig(pod *corev1.Pod, step containerStart) *runtimeapi.ContainerConfig {
	c := step.spec
	ann := containerAnnotations(pod, c.Name)
	ann[annotationHash] = containerHash(c)
	kind := "regular"
	if step.sidecar {
		kind = "sidecar"
	} else if step.init {
		kind = "init"
	}
	ann[annotationInit] = kind
	// The kubelet's annotation: a later run that finds the container
	// without its pod (an orphan) stops it with the pod's grace period.
	ann[annotationGracePeriod] = strconv.FormatInt(gracePeriod(pod), 10)
	envs := make([]*runtimeapi.KeyValue, 0, len(c.Env))
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
		}
	}
	return &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: step.attempt},
		Image:      &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image},
		Command:    c.Command,
		Args:       c.Args,
		WorkingDir: c.WorkingDir,
		Envs:       envs,
		Labels: map[string]string{
			labelPodUID:        string(pod.UID),
			labelPodName:       pod.Name,
			labelPodNamespace:  pod.Namespace,
			labelContainerName: c.Name,
			managedLabel:       "true",
		},
		Annotations: ann,
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: nodeNamespaces()},
		},
	}
}

// pullPriority is the queue priority of a pull of image for pod: 1 for an
// image of an init container (the pod's whole start waits for it), 0 for
// the rest.
func pullPriority(pod *corev1.Pod, image string) int32 {
	for _, c := range pod.Spec.InitContainers {
		if c.Image == image {
			return 1
		}
	}
	return 0
}

// podImages lists the distinct images of pod in start order.
func podImages(pod *corev1.Pod) []string {
	seen := map[string]bool{}
	var out []string
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			if !seen[c.Image] {
				seen[c.Image] = true
				out = append(out, c.Image)
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	return out
}

func gracePeriod(pod *corev1.Pod) int64 {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return 30
}

// nodeNamespaces: the node's network, a private PID namespace per
// container, IPC shared in the pod.
func nodeNamespaces() *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_NODE,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
}
