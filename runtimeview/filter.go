package runtimeview

import (
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The filters reproduce what containerd does on the runtime side: an Id
// (or PodSandboxId) is an exact ID or a prefix that matches exactly one
// ID; State must be equal when set; every LabelSelector key must be present
// with an equal value.

func resolveID[T any](id string, m map[string]T) (string, bool) {
	if _, ok := m[id]; ok {
		return id, true
	}
	match, n := "", 0
	for candidate := range m {
		if strings.HasPrefix(candidate, id) {
			match = candidate
			n++
		}
	}
	return match, n == 1
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func matchSandbox(s *runtimeapi.PodSandbox, id string, f *runtimeapi.PodSandboxFilter) bool {
	if id != "" && s.GetId() != id {
		return false
	}
	if st := f.GetState(); st != nil && s.GetState() != st.GetState() {
		return false
	}
	return labelsMatch(f.GetLabelSelector(), s.GetLabels())
}

func matchContainer(c *runtimeapi.Container, id, sandboxID string, f *runtimeapi.ContainerFilter) bool {
	if id != "" && c.GetId() != id {
		return false
	}
	if sandboxID != "" && c.GetPodSandboxId() != sandboxID {
		return false
	}
	if st := f.GetState(); st != nil && c.GetState() != st.GetState() {
		return false
	}
	return labelsMatch(f.GetLabelSelector(), c.GetLabels())
}

// sandboxFromStatus is the list item a PodSandboxStatus describes.
func sandboxFromStatus(s *runtimeapi.PodSandboxStatus) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{
		Id:             s.GetId(),
		Metadata:       s.GetMetadata(),
		State:          s.GetState(),
		CreatedAt:      s.GetCreatedAt(),
		Labels:         s.GetLabels(),
		Annotations:    s.GetAnnotations(),
		RuntimeHandler: s.GetRuntimeHandler(),
	}
}

// containerFromStatus is the list item a ContainerStatus describes; the
// status does not name the sandbox, so the caller supplies it.
func containerFromStatus(s *runtimeapi.ContainerStatus, podSandboxID string) *runtimeapi.Container {
	return &runtimeapi.Container{
		Id:           s.GetId(),
		PodSandboxId: podSandboxID,
		Metadata:     s.GetMetadata(),
		Image:        s.GetImage(),
		ImageRef:     s.GetImageRef(),
		State:        s.GetState(),
		CreatedAt:    s.GetCreatedAt(),
		Labels:       s.GetLabels(),
		Annotations:  s.GetAnnotations(),
		ImageId:      s.GetImageId(),
	}
}
