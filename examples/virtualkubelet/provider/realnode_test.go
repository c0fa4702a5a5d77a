package provider_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/examples/virtualkubelet/provider"
	"github.com/syncpod/syncpod/internal/testnode"
)

// The same story as the crisim tests, on real containerd: init container,
// sidecar and regular containers reach Running through virtual-kubelet's
// PodController; a missing image shows ErrImagePull then
// ImagePullBackOff; deleted pods stop and go.
func TestRealNodePodController(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "vk/app", testnode.WithSize(1<<20))
	ctx := t.Context()
	dialCtx, cancel := context.WithTimeout(ctx, waitTimeout)
	cri, err := criclient.Dial(dialCtx, n.Endpoint)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cri.Close() })

	// The provider's clock (and the puller's) is fake, so that the
	// ErrImagePull -> ImagePullBackOff step happens when the test says.
	clk := testclock.NewFakeClock(time.Now())
	s := startSystem(t, nil, cri,
		provider.WithPodLogDir(filepath.Join(n.Dir, "pods")),
		provider.WithMaxGracePeriod(5*time.Second),
		provider.WithClock(clk),
		provider.WithPullOptions(asyncpull.WithClock(clk), asyncpull.WithBackOff(30*time.Second, time.Minute)))

	pod := newPod("web", "uid-real-web")
	pod.Spec.HostNetwork = true // the node has no CNI
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "migrate", Image: img, Args: []string{"echo", "migrated", "sleep", "300ms", "exit", "0"}},
		{Name: "proxy", Image: img, RestartPolicy: sidecarPolicy()},
	}
	pod.Spec.Containers = []corev1.Container{
		{Name: "app", Image: img},
		{Name: "worker", Image: img, Args: []string{"pause"}},
	}
	s.create(pod)
	running := s.waitPod(pod.Name, "running", func(p *corev1.Pod) string {
		if p.Status.Phase != corev1.PodRunning || condition(p, corev1.PodReady) != corev1.ConditionTrue {
			return fmt.Sprintf("phase %s ready %s", p.Status.Phase, condition(p, corev1.PodReady))
		}
		return ""
	})
	checkRunning(t, running, []string{"migrate"}, []string{"proxy"}, []string{"app", "worker"})
	if running.Status.PodIP != "192.0.2.10" {
		t.Errorf("hostNetwork pod IP %q, want the node IP", running.Status.PodIP)
	}

	broken := newPod("broken", "uid-real-broken")
	broken.Spec.HostNetwork = true
	broken.Spec.Containers = []corev1.Container{{Name: "app", Image: n.Registry + "/vk/missing:1"}}
	s.create(broken)
	s.waitPod(broken.Name, "in ErrImagePull", func(p *corev1.Pod) string {
		if r := waitingReason(findStatus(p.Status.ContainerStatuses, "app")); r != asyncpull.ReasonErrImagePull {
			return "app waits with " + r
		}
		return ""
	})
	s.waitPod(broken.Name, "in ImagePullBackOff", func(p *corev1.Pod) string {
		if r := waitingReason(findStatus(p.Status.ContainerStatuses, "app")); r != asyncpull.ReasonImagePullBackOff {
			if clk.HasWaiters() {
				clk.Step(2 * time.Second)
			}
			return "app waits with " + r
		}
		return ""
	})

	deletePod(t, s, running)
	final := terminalNotification(t, s, pod.UID)
	if final.Status.Phase != corev1.PodSucceeded {
		// The workload exits 0 on SIGTERM.
		t.Errorf("final phase %q, want Succeeded", final.Status.Phase)
	}
	b, err := s.client.CoreV1().Pods(testNamespace).Get(ctx, broken.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deletePod(t, s, b)
}
