package provider

import (
	"encoding/json"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/concurrentstart/podplan"
	"github.com/syncpod/syncpod/examples/syncpod/podcri"
)

// Labels and annotations the provider puts on sandboxes and containers.
// The io.kubernetes.* ones are the kubelet's, so crictl and other tools
// recognise the pods.
const (
	labelPodUID         = podcri.LabelPodUID
	labelSandboxID      = "vk.syncpod.io/sandbox-id"
	annotationHash      = podcri.AnnotationContainerHash
	annotationPodSource = "kubernetes.io/config.source"
)

// AnnotationContainerAnnotations is a pod annotation that gives containers
// CRI annotations of their own: a JSON object from container name to an
// object of annotations, e.g.
//
//	vk.syncpod.io/container-annotations: '{"migrate": {"crisim.syncpod.io/exit-after": "1s"}}'
//
// The kubelet has no such thing; here it scripts crisim's simulated
// processes (crisim.AnnotationExitAfter ...) and carries runtime-specific
// container annotations.
const AnnotationContainerAnnotations = "vk.syncpod.io/container-annotations"

// containerAnnotations parses AnnotationContainerAnnotations.
func containerAnnotations(pod *corev1.Pod) (map[string]map[string]string, error) {
	raw, ok := pod.Annotations[AnnotationContainerAnnotations]
	if !ok {
		return nil, nil
	}
	var m map[string]map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("annotation %s: want a JSON object of container name to string map: %w", AnnotationContainerAnnotations, err)
	}
	return m, nil
}

// containerHash identifies a container spec (podcri.ContainerHash): a
// running container whose hash differs from its spec's is restarted.
func containerHash(c *corev1.Container) string { return podcri.ContainerHash(c) }

// sandboxConfig is the CRI sandbox config of pod's attempt-th sandbox:
// podcri.SandboxConfig with the pod log directory (created here), plus the
// kubernetes.io/config.source annotation.
func (p *Provider) sandboxConfig(pod *corev1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	cfg, err := podcri.SandboxConfig(pod, podcri.WithAttempt(attempt), podcri.WithPodLogRoot(p.cfg.podLogDir))
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.Annotations[annotationPodSource]; !ok {
		cfg.Annotations[annotationPodSource] = "api"
	}
	if cfg.LogDirectory != "" {
		if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
			return nil, fmt.Errorf("pod log directory: %w", err)
		}
	}
	return cfg, nil
}

// containerConfig is the CRI config of one instance of c:
// podcri.ContainerConfig (virtual-kubelet resolves the downward API before
// CreatePod), plus the sandbox-id label and the container's annotations
// from AnnotationContainerAnnotations. Without a pod log directory the
// container has no log path.
func (p *Provider) containerConfig(pod *corev1.Pod, c podplan.Container, attempt uint32, imageRef, sandboxID string) (*runtimeapi.ContainerConfig, error) {
	spec := c.Spec
	extra, err := containerAnnotations(pod)
	if err != nil {
		return nil, err
	}
	cfg, err := podcri.ContainerConfig(pod, spec, podcri.WithRestartCount(attempt), podcri.WithImageRef(imageRef))
	if err != nil {
		return nil, err
	}
	for k, v := range extra[spec.Name] {
		cfg.Annotations[k] = v
	}
	cfg.Labels[labelSandboxID] = sandboxID
	if p.cfg.podLogDir == "" {
		cfg.LogPath = ""
	}
	return cfg, nil
}
