package agent

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
)

// sandboxConfig is the CRI sandbox config of pod, built by
// podcri.SandboxConfig with opts, plus the agent's managed label, which its
// restart adoption reads.
func sandboxConfig(pod *corev1.Pod, attempt uint32, opts ...podcri.SandboxOption) *runtimeapi.PodSandboxConfig {
	cfg, err := podcri.SandboxConfig(pod, append([]podcri.SandboxOption{podcri.WithAttempt(attempt)}, opts...)...)
	if err != nil { // only a nil pod, which the agent never has
		panic(err)
	}
	cfg.Labels[managedLabel] = "true"
	return cfg
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

// containerConfig is the CRI config of step, built by
// podcri.ContainerConfig with the sandbox's namespaces (and extra), plus the agent's
// per-container annotations, its managed label and its hash and kind
// annotations, which its restart adoption and status code read. Without
// logs (no Node.PodLogDir) the sandbox has no log directory, so the
// container gets no log path.
func containerConfig(pod *corev1.Pod, step containerStart, logs bool, extra ...podcri.ContainerOption) (*runtimeapi.ContainerConfig, error) {
	c := step.spec
	cfg, err := podcri.ContainerConfig(pod, c, append([]podcri.ContainerOption{
		podcri.WithRestartCount(step.attempt), podcri.WithNamespaceOptions(nodeNamespaces(pod))}, extra...)...)
	if err != nil {
		return nil, err
	}
	if !logs {
		cfg.LogPath = ""
	}
	for k, v := range containerAnnotations(pod, c.Name) {
		cfg.Annotations[k] = v
	}
	cfg.Annotations[annotationHash] = containerHash(c)
	kind := "regular"
	if step.sidecar {
		kind = "sidecar"
	} else if step.init {
		kind = "init"
	}
	cfg.Annotations[annotationInit] = kind
	cfg.Labels[managedLabel] = "true"
	return cfg, nil
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

// nodeNamespaces is pod's namespaces as the kubelet maps them
// (podcri.NamespaceOptions) with the node's network.
func nodeNamespaces(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := podcri.NamespaceOptions(pod)
	ns.Network = runtimeapi.NamespaceMode_NODE
	return ns
}

// podSandboxConfig is sandboxConfig with this agent's node settings: its
// pod log directory, and the node's network unless Node.PodNetwork.
func (a *Agent) podSandboxConfig(pod *corev1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	var opts []podcri.SandboxOption
	if a.cfg.podLogDir != "" {
		opts = append(opts, podcri.WithPodLogRoot(a.cfg.podLogDir))
	}
	if !a.cfg.podNetwork {
		// The node's network namespace (so no hostname): the agent sets
		// up no CNI.
		opts = append(opts, podcri.WithNodeNetwork())
	}
	return sandboxConfig(pod, attempt, opts...)
}

// podIP is the IP the agent reports for a pod: the node's, unless the pod
// is on the runtime's pod network (Node.PodNetwork), where it is its
// sandbox's.
func (a *Agent) podIP(pod *corev1.Pod, st *runtimePodStatus) string {
	if a.cfg.podNetwork && !pod.Spec.HostNetwork {
		if st == nil {
			return ""
		}
		return st.SandboxIP
	}
	return a.cfg.nodeIP
}

// podContainerConfig is containerConfig with this agent's node settings
// (log paths, the node's IPs for the downward API), the pod's volumes
// mounted (set up by the pod's sync, see volumeManager) and the
// container's termination-message file.
func (a *Agent) podContainerConfig(pod *corev1.Pod, step containerStart) (*runtimeapi.ContainerConfig, error) {
	extra, err := a.volumes.containerOptions(pod, step.spec, step.attempt)
	if err != nil {
		return nil, err
	}
	if a.cfg.podNetwork {
		extra = append(extra, podcri.WithNamespaceOptions(podcri.NamespaceOptions(pod)))
	}
	if objs, done := a.envObjects(pod, step.spec.Name); objs != nil {
		defer done()
		extra = append(extra, podcri.WithEnvObjects(objs))
	}
	if a.cfg.nodeIP != "" && (!a.cfg.podNetwork || pod.Spec.HostNetwork) {
		extra = append(extra, podcri.WithPodIPs(a.cfg.nodeIP, a.cfg.nodeIP))
	}
	return containerConfig(pod, step, a.cfg.podLogDir != "", extra...)
}

// capGrace applies Node.MaxGracePeriod to a pod's grace period.
func (a *Agent) capGrace(d time.Duration) time.Duration {
	if a.cfg.maxGrace > 0 && d > a.cfg.maxGrace {
		return a.cfg.maxGrace
	}
	return d
}
