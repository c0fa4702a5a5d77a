package provider

import (
	"context"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"

	"github.com/syncpod/syncpod/concurrentstart/podplan"
)

// validatePod rejects what the provider cannot run, with an
// errdefs.InvalidInput error naming the problem.
func validatePod(pod *corev1.Pod) error {
	if pod == nil {
		return errdefs.InvalidInput("nil pod")
	}
	if pod.Namespace == "" || pod.Name == "" || pod.UID == "" {
		return errdefs.InvalidInputf("pod %s/%s: namespace, name and uid are required", pod.Namespace, pod.Name)
	}
	if len(pod.Spec.Containers) == 0 {
		return errdefs.InvalidInputf("pod %s/%s: no containers", pod.Namespace, pod.Name)
	}
	seen := map[string]bool{}
	check := func(c *corev1.Container) error {
		switch {
		case c.Name == "":
			return errdefs.InvalidInputf("pod %s/%s: a container has no name", pod.Namespace, pod.Name)
		case seen[c.Name]:
			return errdefs.InvalidInputf("pod %s/%s: container name %q used twice", pod.Namespace, pod.Name, c.Name)
		case c.Image == "":
			return errdefs.InvalidInputf("pod %s/%s: container %q has no image", pod.Namespace, pod.Name, c.Name)
		}
		seen[c.Name] = true
		return nil
	}
	for i := range pod.Spec.InitContainers {
		if err := check(&pod.Spec.InitContainers[i]); err != nil {
			return err
		}
	}
	for i := range pod.Spec.Containers {
		if err := check(&pod.Spec.Containers[i]); err != nil {
			return err
		}
	}
	if _, err := containerAnnotations(pod); err != nil {
		return errdefs.InvalidInputf("pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	nop := func(context.Context, podplan.Container) error { return nil }
	if _, err := podplan.Build(pod, podplan.Funcs{Start: nop, WaitCompleted: nop}); err != nil {
		return errdefs.InvalidInputf("pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return nil
}
