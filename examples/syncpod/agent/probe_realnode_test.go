package agent_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/internal/testnode"
)

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// On real containerd, with the node's network: a postStart exec hook
// writes a marker in the container, which an exec liveness probe checks;
// an httpGet readiness probe on a named port reaches the server the
// container runs; removing the marker (an ExecSync of our own) fails the
// liveness probe, and the container is killed and restarted, its new
// instance passing again; deleting the pod runs the httpGet preStop hook,
// which reaches a server of the test before the container stops.
func TestRealNodeProbesAndHooks(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "syncpod/probed", testnode.WithSize(1<<20))
	ev := &events{t: t}
	a := startRealAgent(t, n, nil, agent.WithEventHook(ev.hook))
	ctx := context.Background()

	var preStops atomic.Int32
	hookPort := freePort(t)
	srv := &http.Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(hookPort)),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/prestop" {
				preStops.Add(1)
			}
		})}
	l, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	webPort := freePort(t)
	marker := "/started"
	wl := testnode.WorkloadPath
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probed", Namespace: "default", UID: "uid-probed"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{
			Name: "web", Image: img, Command: []string{wl},
			Args:  []string{"http", fmt.Sprintf("127.0.0.1:%d", webPort), "pause"},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(webPort)}},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}},
			LivenessProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 2, ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{wl, "exists", marker}}}},
			Lifecycle: &corev1.Lifecycle{
				PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{wl, "touch", marker}}},
				PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/prestop",
					Port: intstr.FromInt32(int32(hookPort))}},
			},
		}}},
	}
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})

	running := func(attempt uint32) string {
		cs, err := listRunning(ctx, n)
		if err != nil {
			return ""
		}
		for _, c := range cs {
			if c.Metadata.Name == "web" && c.Metadata.Attempt == attempt {
				return c.Id
			}
		}
		return ""
	}
	var id string
	waitFor(t, "web running", func() bool { id = running(0); return id != "" })
	waitFor(t, "web ready (httpGet probe on the named port)", func() bool {
		_, ready := a.ProbeState(pod.UID, "web", id)
		return ready
	})
	if n := len(ev.find(func(e agent.Event) bool { return e.Type == agent.EventKilling })); n != 0 {
		t.Fatal("web killed while its marker was there: the postStart hook did not write it, or the exec probe failed")
	}

	// Our own exec removes the marker: the liveness probe fails.
	if _, err := n.RuntimeService().ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{wl, "rm", marker}, Timeout: 10}); err != nil {
		t.Fatalf("ExecSync rm: %v", err)
	}
	waitFor(t, "web killed by its liveness probe", func() bool {
		return len(ev.find(func(e agent.Event) bool { return e.Type == agent.EventKilling && e.Container == "web" })) > 0
	})
	waitFor(t, "web restarted", func() bool { id = running(1); return id != "" })
	waitFor(t, "the new instance ready", func() bool {
		_, ready := a.ProbeState(pod.UID, "web", id)
		return ready
	})
	if got := preStops.Load(); got != 1 {
		t.Fatalf("%d preStop calls after the liveness kill, want 1", got)
	}

	a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: pod})
	waitFor(t, "the pod gone", func() bool { return a.Snapshot().Total == 0 })
	if got := preStops.Load(); got != 2 {
		t.Fatalf("%d preStop calls, want 2 (the liveness kill and the deletion)", got)
	}
	if fails := ev.find(func(e agent.Event) bool {
		return e.Type == agent.EventFailedPostStartHook || e.Type == agent.EventFailedPreStopHook
	}); len(fails) != 0 {
		t.Fatalf("hook failures: %v", fails)
	}
}
