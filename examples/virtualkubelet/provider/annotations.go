package provider

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
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

// agentPod is the copy of pod handed to the agent: the container
// annotations of AnnotationContainerAnnotations become the agent's
// per-container pod annotations ("<key>.<container>"). The pod was
// validated, so the annotation parses.
func agentPod(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	extra, _ := containerAnnotations(pod)
	if len(extra) == 0 {
		return out
	}
	for name, kv := range extra {
		for k, v := range kv {
			out.Annotations[k+"."+name] = v
		}
	}
	return out
}
