package provider

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/concurrentstart/podplan"
)

// Labels and annotations the provider puts on sandboxes and containers.
// The io.kubernetes.* ones are the kubelet's, so crictl and other tools
// recognise the pods.
const (
	labelPodName        = "io.kubernetes.pod.name"
	labelPodNamespace   = "io.kubernetes.pod.namespace"
	labelPodUID         = "io.kubernetes.pod.uid"
	labelContainerName  = "io.kubernetes.container.name"
	labelSandboxID      = "vk.syncpod.io/sandbox-id"
	annotationHash      = "io.kubernetes.container.hash"
	annotationRestarts  = "io.kubernetes.container.restartCount"
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

// containerHash identifies a container spec: a running container whose
// hash differs from its spec's is restarted.
func containerHash(c *corev1.Container) string {
	b, _ := json.Marshal(c) // a corev1.Container always marshals
	h := fnv.New64a()
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

func namespaceOptions(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

// sandboxConfig is the CRI sandbox config of pod's attempt-th sandbox.
func (p *Provider) sandboxConfig(pod *corev1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	labels := map[string]string{}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[labelPodName], labels[labelPodNamespace], labels[labelPodUID] = pod.Name, pod.Namespace, string(pod.UID)
	annotations := map[string]string{annotationPodSource: "api"}
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		Labels:      labels,
		Annotations: annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: namespaceOptions(pod)},
		},
	}
	if !pod.Spec.HostNetwork {
		cfg.Hostname = pod.Name // runc cannot set a hostname in the node's UTS namespace
	}
	if p.cfg.podLogDir != "" {
		cfg.LogDirectory = filepath.Join(p.cfg.podLogDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
		if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
			return nil, fmt.Errorf("pod log directory: %w", err)
		}
	}
	return cfg, nil
}

// containerConfig is the CRI config of one instance of c.
func (p *Provider) containerConfig(pod *corev1.Pod, c podplan.Container, attempt uint32, imageRef, sandboxID string) (*runtimeapi.ContainerConfig, error) {
	spec := c.Spec
	extra, err := containerAnnotations(pod)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{
		annotationHash:     containerHash(spec),
		annotationRestarts: strconv.Itoa(int(attempt)),
	}
	for k, v := range extra[spec.Name] {
		annotations[k] = v
	}
	envs := make([]*runtimeapi.KeyValue, 0, len(spec.Env))
	for _, e := range spec.Env {
		if e.ValueFrom == nil { // virtual-kubelet resolves the downward API before CreatePod
			envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
		}
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: spec.Name, Attempt: attempt},
		Image:      &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: spec.Image},
		Command:    spec.Command,
		Args:       spec.Args,
		WorkingDir: spec.WorkingDir,
		Envs:       envs,
		Labels: map[string]string{
			labelPodName: pod.Name, labelPodNamespace: pod.Namespace, labelPodUID: string(pod.UID),
			labelContainerName: spec.Name, labelSandboxID: sandboxID,
		},
		Annotations: annotations,
		Stdin:       spec.Stdin,
		StdinOnce:   spec.StdinOnce,
		Tty:         spec.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)},
		},
	}
	if p.cfg.podLogDir != "" {
		cfg.LogPath = filepath.Join(spec.Name, strconv.Itoa(int(attempt))+".log")
	}
	return cfg, nil
}
