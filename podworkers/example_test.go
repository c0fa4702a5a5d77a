package podworkers_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncpod/syncpod/podworkers"
)

// printSyncer prints each phase; a real one talks to the runtime.
type printSyncer struct {
	mu     sync.Mutex
	once   sync.Once
	synced chan struct{} // closed by the first SyncPod
	done   chan struct{} // closed by SyncTerminatedPod
}

func (s *printSyncer) SyncPod(ctx context.Context, t podworkers.UpdateType, pod *corev1.Pod) (podworkers.Result, error) {
	s.print("SyncPod", pod.Name, t)
	s.once.Do(func() { close(s.synced) })
	return podworkers.Result{}, nil
}

func (s *printSyncer) SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, grace time.Duration) error {
	s.print("SyncTerminatingPod", pod.Name, grace)
	return nil
}

func (s *printSyncer) SyncTerminatedPod(ctx context.Context, pod *corev1.Pod) error {
	s.print("SyncTerminatedPod", pod.Name)
	close(s.done)
	return nil
}

func (s *printSyncer) SyncTerminatingRuntimePod(ctx context.Context, pod podworkers.RuntimePod, grace time.Duration) error {
	s.print("SyncTerminatingRuntimePod", pod.Name, grace)
	return nil
}

func (s *printSyncer) print(a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Println(a...)
}

func Example() {
	s := &printSyncer{synced: make(chan struct{}), done: make(chan struct{})}
	w, err := podworkers.New(s, podworkers.WithMaxParallel(4), podworkers.WithResyncInterval(0))
	if err != nil {
		panic(err)
	}
	defer w.Close()

	grace := int64(5)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace}}
	if err := w.Update(podworkers.PodUpdate{Type: podworkers.UpdateCreate, Pod: pod}); err != nil {
		panic(err)
	}
	<-s.synced
	// Later the pod is deleted; its worker terminates it in order.
	if err := w.Update(podworkers.PodUpdate{Type: podworkers.UpdateKill, Pod: pod}); err != nil {
		panic(err)
	}
	<-s.done
	for w.Phase(pod.UID) != podworkers.PhaseFinished {
		time.Sleep(time.Millisecond)
	}
	fmt.Println(w.Phase(pod.UID), w.Forget(pod.UID))
	// Output:
	// SyncPod web Create
	// SyncTerminatingPod web 5s
	// SyncTerminatedPod web
	// Finished <nil>
}
