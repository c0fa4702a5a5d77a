package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// An init container's image is queued ahead of the regular containers'
// images, also when a regular container shares it.
func TestPullPriorityInitImagesFirst(t *testing.T) {
	pod := testPod([]corev1.Container{{Name: "init", Image: "img-init"}}, "app", "side")
	pod.Spec.Containers[1].Image = "img-init"
	for image, want := range map[string]int32{"img-init": 1, "img-app": 0, "img-other": 0} {
		if got := pullPriority(pod, image); got != want {
			t.Errorf("pullPriority(%q) = %d, want %d", image, got, want)
		}
	}
	if got := pullPriority(testPod(nil, "app"), "img-app"); got != 0 {
		t.Errorf("pullPriority without init containers = %d, want 0", got)
	}
}
