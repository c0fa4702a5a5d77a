package runtimeview

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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
