package agent_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/criclient/podcri"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

// statusLog records what WithPodStatusHook delivers.
type statusLog struct {
	mu  sync.Mutex
	all []agent.PodStatusUpdate
}

func (l *statusLog) hook(u agent.PodStatusUpdate) {
	l.mu.Lock()
	l.all = append(l.all, u)
	l.mu.Unlock()
}

func (l *statusLog) updates() []agent.PodStatusUpdate {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]agent.PodStatusUpdate(nil), l.all...)
}

// last is the newest update of the named pod, with ok false if none.
func (l *statusLog) last(name string) (agent.PodStatusUpdate, bool) {
	all := l.updates()
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Pod.Name == name {
			return all[i], true
		}
	}
	return agent.PodStatusUpdate{}, false
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// The agent reports the corev1.PodStatus a kubelet would, through its
// status hook and Agent.Pod, in both modes: Pending while the init
// container runs, Running and Ready with the runtime's container IDs,
// ErrImagePull for a missing image, and, once a deleted pod has stopped,
// one terminal status with the deletion's timestamp, after which nothing.
func TestPodStatusReported(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			img := "registry.sim/app:1"
			n := startSim(t, crisim.WithImage(img, 1), crisim.WithVersion("containerd", "sim"))
			var log statusLog
			a := startAgent(t, n, agent.WithMode(mode), agent.WithPodStatusHook(log.hook), agent.WithNodeIP("192.0.2.7"))
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web",
					Annotations: map[string]string{crisim.AnnotationExitAfter + ".setup": "20ms"}},
				Spec: corev1.PodSpec{
					InitContainers: []corev1.Container{{Name: "setup", Image: img}},
					Containers:     []corev1.Container{{Name: "app", Image: img}},
				},
			}
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
			waitFor(t, "web running and ready", func() bool {
				u, ok := log.last("web")
				return ok && u.Pod.Status.Phase == corev1.PodRunning && condition(u.Pod, corev1.PodReady) == corev1.ConditionTrue
			}, func() string {
				p, err := a.Pod("uid-web")
				if err != nil {
					return err.Error()
				}
				u, _ := log.last("web")
				return fmt.Sprintf("%d updates, last %+v; now %+v", len(log.updates()), u.Pod.Status, p.Status)
			})
			first := log.updates()[0].Pod
			if first.Status.Phase != corev1.PodPending || first.Status.ContainerStatuses[0].State.Waiting == nil ||
				first.Status.ContainerStatuses[0].State.Waiting.Reason != podcri.ReasonPodInitializing {
				t.Errorf("first status %s %+v, want Pending with app PodInitializing", first.Status.Phase, first.Status.ContainerStatuses)
			}
			got, err := a.Pod("uid-web")
			if err != nil {
				t.Fatal(err)
			}
			app := got.Status.ContainerStatuses[0]
			if !strings.HasPrefix(app.ContainerID, "containerd://") || app.Ready != true || app.State.Running == nil {
				t.Errorf("app status %+v", app)
			}
			if init := got.Status.InitContainerStatuses[0]; init.State.Terminated == nil || init.State.Terminated.Reason != podcri.ReasonCompleted || !init.Ready {
				t.Errorf("init status %+v", init)
			}
			if got.Status.HostIP != "192.0.2.7" || got.Status.PodIP != "192.0.2.7" || got.Status.StartTime == nil {
				t.Errorf("host %q pod %q start %v", got.Status.HostIP, got.Status.PodIP, got.Status.StartTime)
			}

			broken := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "broken", UID: "uid-broken"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.sim/missing:1"}}},
			}
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: broken})
			waitFor(t, "broken in ErrImagePull", func() bool {
				p, err := a.Pod("uid-broken")
				w := p.Status.ContainerStatuses[0].State.Waiting
				return err == nil && w != nil && w.Reason == asyncpull.ReasonErrImagePull && w.Message != ""
			})

			deleted := pod.DeepCopy()
			now := metav1.Now()
			deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &now, ptr.To[int64](0)
			a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: deleted})
			waitFor(t, "web's terminal status", func() bool {
				u, ok := log.last("web")
				return ok && u.Final
			})
			waitFor(t, "web forgotten", func() bool {
				_, err := a.Pod("uid-web")
				return errors.Is(err, agent.ErrUnknownPod)
			})
			final, _ := log.last("web")
			if final.Pod.DeletionTimestamp == nil || !final.Pod.DeletionTimestamp.Equal(&now) {
				t.Errorf("terminal status without the deletion's timestamp: %v", final.Pod.DeletionTimestamp)
			}
			if ph := final.Pod.Status.Phase; ph != corev1.PodSucceeded && ph != corev1.PodFailed {
				t.Errorf("terminal phase %s", ph)
			}
			if term := final.Pod.Status.ContainerStatuses[0].State.Terminated; term == nil {
				t.Errorf("terminal status with app not terminated: %+v", final.Pod.Status.ContainerStatuses[0].State)
			}
			finals := 0
			for _, u := range log.updates() {
				if u.Pod.Name == "web" && u.Final {
					finals++
				}
			}
			if finals != 1 {
				t.Errorf("%d terminal statuses, want 1", finals)
			}
		})
	}
}
