package podworkers_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/syncpod/syncpod/podworkers"
)

// Funcs calls the functions set and lets the nil ones succeed: an empty
// Funcs takes a killed pod through every phase to finished.
func TestFuncs(t *testing.T) {
	var grace time.Duration
	w := newWorkers(t, podworkers.Funcs{Terminating: func(_ context.Context, _ *corev1.Pod, g time.Duration) error {
		grace = g
		return nil
	}})
	g := 3 * time.Second
	update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateCreate, Pod: pod("a")})
	update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateKill, Pod: pod("a"), GracePeriod: &g})
	update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateKill, RuntimePod: &podworkers.RuntimePod{UID: "o"}})
	settle(t, w)
	if w.Phase("a") != podworkers.PhaseFinished || w.Phase("o") != podworkers.PhaseFinished || grace != g {
		t.Fatalf("phases %v %v, grace %v", w.Phase("a"), w.Phase("o"), grace)
	}
}
