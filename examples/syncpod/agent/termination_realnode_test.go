package agent_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/internal/testnode"
)

// finalStatus keeps, for each container the agent removes, containerd's
// last status of it (read just before the removal) and when its stop was
// asked for.
type finalStatus struct {
	cri.RuntimeService
	mu      sync.Mutex
	stopped map[string]time.Time                   // container name → StopContainer called
	final   map[string]*runtimeapi.ContainerStatus // container name → status before RemoveContainer
}

func (f *finalStatus) name(ctx context.Context, id string) string {
	st, err := f.ContainerStatus(ctx, id, false)
	if err != nil {
		return id
	}
	return st.GetStatus().GetMetadata().GetName()
}

func (f *finalStatus) StopContainer(ctx context.Context, id string, timeout int64) error {
	name := f.name(ctx, id)
	f.mu.Lock()
	if _, ok := f.stopped[name]; !ok {
		f.stopped[name] = time.Now()
	}
	f.mu.Unlock()
	return f.RuntimeService.StopContainer(ctx, id, timeout)
}

func (f *finalStatus) RemoveContainer(ctx context.Context, id string) error {
	if st, err := f.ContainerStatus(ctx, id, false); err == nil {
		f.mu.Lock()
		f.final[st.GetStatus().GetMetadata().GetName()] = st.GetStatus()
		f.mu.Unlock()
	}
	return f.RuntimeService.RemoveContainer(ctx, id)
}

// On real containerd, a deleted pod's grace period holds: a container that
// ignores SIGTERM is killed when the 3 s grace period ends (containerd's
// own finish time, exit 137), one that honours it exits at once with 0,
// and the sidecar stops after both.
func TestRealNodeGracePeriod(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "syncpod/app", testnode.WithSize(2<<20))
	rec := &finalStatus{stopped: map[string]time.Time{}, final: map[string]*runtimeapi.ContainerStatus{}}
	a := startRealAgent(t, n, func(rt cri.RuntimeService) cri.RuntimeService { rec.RuntimeService = rt; return rec })
	grace := int64(3)
	always := corev1.ContainerRestartPolicyAlways
	workload := func(name string, args ...string) corev1.Container {
		return corev1.Container{Name: name, Image: img, Command: []string{"/workload"}, Args: args}
	}
	sidecar := workload("proxy", "pause")
	sidecar.RestartPolicy = &always
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "graceful", Namespace: "default"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			InitContainers:                []corev1.Container{sidecar},
			Containers:                    []corev1.Container{workload("stubborn", "ignore-term", "touch", "/up", "pause"), workload("polite", "touch", "/up", "pause")},
		},
	}
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
	waitFor(t, "the pod running", allRunning(a, 1))
	// Running is not yet listening: a SIGTERM that comes before the
	// program has its handler (a loaded node can take a while) meets the
	// kernel's PID 1 rule or the Go runtime's default, not the workload.
	// The real test of the agent starts once both are.
	waitListening(t, rec.RuntimeService, "polite")
	waitListening(t, rec.RuntimeService, "stubborn")
	a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: pod})
	waitFor(t, "the pod gone", func() bool { return a.Snapshot().Total == 0 })

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, name := range []string{"stubborn", "polite", "proxy"} {
		if rec.final[name] == nil || rec.stopped[name].IsZero() {
			t.Fatalf("%s: stop asked at %v, final status %v; want both", name, rec.stopped[name], rec.final[name])
		}
	}
	finished := func(name string) time.Time { return time.Unix(0, rec.final[name].FinishedAt) }
	stubborn := finished("stubborn").Sub(rec.stopped["stubborn"])
	if stubborn < 2500*time.Millisecond || rec.final["stubborn"].ExitCode != 137 {
		t.Errorf("stubborn finished %v after its stop with exit %d, want the 3 s grace period, then SIGKILL (137)",
			stubborn, rec.final["stubborn"].ExitCode)
	}
	polite := finished("polite").Sub(rec.stopped["polite"])
	if polite >= 2500*time.Millisecond || rec.final["polite"].ExitCode != 0 {
		t.Errorf("polite finished %v after its stop with exit %d, want it to exit on SIGTERM with 0", polite, rec.final["polite"].ExitCode)
	}
	if rec.stopped["proxy"].Before(finished("stubborn")) || rec.stopped["proxy"].Before(finished("polite")) {
		t.Errorf("sidecar stop asked at %v, before the regular containers finished (%v, %v)",
			rec.stopped["proxy"], finished("stubborn"), finished("polite"))
	}
	t.Logf("stubborn killed %v after SIGTERM (exit %d), polite exited after %v; sidecar stopped after both",
		stubborn.Round(time.Millisecond), rec.final["stubborn"].ExitCode, polite.Round(time.Millisecond))
}

// waitListening waits until the running container name has run its
// steps up to "touch /up", which the workload reaches only once its
// SIGTERM handler is set (a SIGTERM before that would meet the Go
// runtime's default, which for a container's PID 1 is exit 2).
func waitListening(t *testing.T, rt cri.RuntimeService, name string) {
	t.Helper()
	ctx := context.Background()
	cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.container.name": name}})
	if err != nil || len(cs) != 1 {
		t.Fatalf("container %s: %d found, %v", name, len(cs), err)
	}
	waitFor(t, name+" listening", func() bool {
		_, _, err := rt.ExecSync(ctx, cs[0].Id, []string{"/workload", "exists", "/up"}, 5*time.Second)
		return err == nil
	})
}
