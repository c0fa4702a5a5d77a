package provider

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

// After DeletePod only the agent's terminal status of the pod reaches
// NotifyPods, and it is the last: a status the agent computed before the
// pod stopped is dropped, and so is anything after the terminal one.
func TestDeletedPodGetsOnlyItsTerminalStatus(t *testing.T) {
	p := &Provider{notifier: newNotifier(), pods: map[string]*podEntry{}, byUID: map[types.UID]*podEntry{}}
	defer p.notifier.close()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web",
		Annotations: map[string]string{"a": "b"}}}
	e := &podEntry{key: "default/web", uid: pod.UID, pod: pod.DeepCopy(), deleting: true}
	p.byUID[e.uid] = e

	running := pod.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	p.onStatus(agent.PodStatusUpdate{Pod: running})
	if n := p.notifier.pendingLen(); n != 0 {
		t.Fatalf("a running status of a deleted pod was queued (%d pending)", n)
	}
	final := pod.DeepCopy()
	final.Status.Phase = corev1.PodSucceeded
	final.Annotations["agent-only"] = "x"
	p.onStatus(agent.PodStatusUpdate{Pod: final, Final: true})
	if n := p.notifier.pendingLen(); n != 1 {
		t.Fatalf("terminal status: %d pending, want 1", n)
	}
	if got := p.notifier.pending[string(e.uid)]; got.Status.Phase != corev1.PodSucceeded || got.Annotations["agent-only"] != "" {
		t.Errorf("queued %s with annotations %v, want Succeeded with the pod's own annotations", got.Status.Phase, got.Annotations)
	}
	if _, ok := p.byUID[e.uid]; ok {
		t.Error("the pod is still known after its terminal status")
	}
	p.onStatus(agent.PodStatusUpdate{Pod: running})
	if n := p.notifier.pendingLen(); n != 1 {
		t.Errorf("a status after the terminal one was queued (%d pending)", n)
	}
}
