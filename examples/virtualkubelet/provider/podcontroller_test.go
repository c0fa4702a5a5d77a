package provider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/criclient/podcri"
	"github.com/syncpod/syncpod/examples/virtualkubelet/provider"
)

// initSidecarPod has an init container that waits for the test, a
// sidecar, and two regular containers.
func initSidecarPod(name string, uid types.UID) *corev1.Pod {
	pod := newPod(name, uid)
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "migrate", Image: toolsImage},
		{Name: "proxy", Image: toolsImage, RestartPolicy: sidecarPolicy()},
	}
	pod.Spec.Containers = []corev1.Container{
		{Name: "app", Image: appImage},
		{Name: "worker", Image: toolsImage},
	}
	return pod
}

func containerID(cs *corev1.ContainerStatus) string {
	return strings.TrimPrefix(cs.ContainerID, "containerd://")
}

// checkRunning asserts what a kubectl user sees for a running pod.
func checkRunning(t *testing.T, pod *corev1.Pod, wantInit, wantSidecars, wantRegular []string) {
	t.Helper()
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %q, want Running", pod.Status.Phase)
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if got := condition(pod, ct); got != corev1.ConditionTrue {
			t.Errorf("condition %s = %q, want True", ct, got)
		}
	}
	if pod.Status.StartTime == nil {
		t.Error("no start time")
	}
	for _, name := range wantInit {
		cs := findStatus(pod.Status.InitContainerStatuses, name)
		if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.Reason != podcri.ReasonCompleted || cs.State.Terminated.ExitCode != 0 {
			t.Errorf("init container %s: %+v, want terminated Completed exit 0", name, cs)
			continue
		}
		if !cs.Ready { // the kubelet's: an init container that succeeded is ready
			t.Errorf("init container %s completed but is not ready", name)
		}
	}
	check := func(list []corev1.ContainerStatus, name string) {
		cs := findStatus(list, name)
		switch {
		case cs == nil:
			t.Errorf("container %s: no status", name)
		case cs.State.Running == nil || cs.State.Running.StartedAt.IsZero():
			t.Errorf("container %s: state %+v, want running with a start time", name, cs.State)
		case !cs.Ready || cs.Started == nil || !*cs.Started:
			t.Errorf("container %s: ready %v started %v", name, cs.Ready, cs.Started)
		case !strings.HasPrefix(cs.ContainerID, "containerd://") || containerID(cs) == "":
			t.Errorf("container %s: container ID %q", name, cs.ContainerID)
		case cs.ImageID == "":
			t.Errorf("container %s: no image ID", name)
		case cs.RestartCount != 0:
			t.Errorf("container %s: restart count %d", name, cs.RestartCount)
		}
	}
	for _, n := range wantSidecars {
		check(pod.Status.InitContainerStatuses, n)
	}
	for _, n := range wantRegular {
		check(pod.Status.ContainerStatuses, n)
	}
}

func TestPodControllerInitSidecarsRunning(t *testing.T) {
	srv, cri := startCrisim(t, crisim.WithRealisticLatencies(), crisim.WithSeed(1))
	s := startSystem(t, srv, cri)
	pod := s.create(initSidecarPod("web", "uid-web"))

	// Initialising: the init container runs, nothing else is started.
	initializing := s.waitPod(pod.Name, "initialising", func(p *corev1.Pod) string {
		mig := findStatus(p.Status.InitContainerStatuses, "migrate")
		if mig == nil || mig.State.Running == nil {
			return fmt.Sprintf("migrate %+v", mig)
		}
		return ""
	})
	if initializing.Status.Phase != corev1.PodPending {
		t.Errorf("initialising phase %q, want Pending", initializing.Status.Phase)
	}
	if got := condition(initializing, corev1.PodInitialized); got != corev1.ConditionFalse {
		t.Errorf("initialising: Initialized %q, want False", got)
	}
	if got := condition(initializing, corev1.PodReadyToStartContainers); got != corev1.ConditionTrue {
		t.Errorf("initialising: PodReadyToStartContainers %q, want True", got)
	}
	for _, n := range []string{"app", "worker"} {
		if r := waitingReason(findStatus(initializing.Status.ContainerStatuses, n)); r != podcri.ReasonPodInitializing {
			t.Errorf("initialising: %s waits with %q, want PodInitializing", n, r)
		}
	}
	if r := waitingReason(findStatus(initializing.Status.InitContainerStatuses, "proxy")); r != podcri.ReasonPodInitializing {
		t.Errorf("initialising: sidecar waits with %q, want PodInitializing", r)
	}
	if n := len(containersOf(t, cri, pod.UID)); n != 1 {
		t.Errorf("initialising: %d containers in the runtime, want only the init container", n)
	}

	// The init container finishes: the sidecar, then the regular containers.
	migrate := findStatus(initializing.Status.InitContainerStatuses, "migrate")
	if err := srv.Runtime().ExitContainer(containerID(migrate), 0); err != nil {
		t.Fatal(err)
	}
	running := s.waitPod(pod.Name, "running", func(p *corev1.Pod) string {
		if p.Status.Phase != corev1.PodRunning || condition(p, corev1.PodReady) != corev1.ConditionTrue {
			return fmt.Sprintf("phase %s ready %s", p.Status.Phase, condition(p, corev1.PodReady))
		}
		return ""
	})
	checkRunning(t, running, []string{"migrate"}, []string{"proxy"}, []string{"app", "worker"})

	// The provider answers from its cache with copies.
	got, err := s.prov.GetPod(context.Background(), testNamespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	got.Status.Phase = "Mutated"
	got.Status.ContainerStatuses[0].Ready = false
	again, _ := s.prov.GetPod(context.Background(), testNamespace, pod.Name)
	if again.Status.Phase != corev1.PodRunning || !again.Status.ContainerStatuses[0].Ready {
		t.Error("GetPod returned the cached object, not a copy")
	}
	st, err := s.prov.GetPodStatus(context.Background(), testNamespace, pod.Name)
	if err != nil || st.Phase != corev1.PodRunning {
		t.Errorf("GetPodStatus: %v %v", st, err)
	}
	pods, err := s.prov.GetPods(context.Background())
	if err != nil || len(pods) != 1 || pods[0].Name != pod.Name {
		t.Errorf("GetPods: %v %v", pods, err)
	}

	// Delete: the pod stops, a terminal status is notified, it goes.
	deletePod(t, s, running)
	final := terminalNotification(t, s, pod.UID)
	for _, cs := range append(final.Status.InitContainerStatuses, final.Status.ContainerStatuses...) {
		if cs.State.Terminated == nil || cs.Ready {
			t.Errorf("terminal status: container %s: %+v", cs.Name, cs.State)
		}
	}
	if final.DeletionTimestamp == nil {
		t.Error("terminal status has no deletion timestamp")
	}
}

// deletePod deletes the pod as the API server does for kubectl delete:
// it sets the deletion timestamp; the PodController calls DeletePod and
// removes the pod once the grace period is over.
func deletePod(t *testing.T, s *system, pod *corev1.Pod) {
	t.Helper()
	pod = pod.DeepCopy()
	now := metav1.Now()
	var grace int64 = 1
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &now, &grace
	if _, err := s.client.CoreV1().Pods(pod.Namespace).Update(s.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitGone(pod.Name)
	eventually(t, "pod gone from the provider and the runtime", func() string {
		if _, err := s.prov.GetPod(context.Background(), pod.Namespace, pod.Name); !errdefs.IsNotFound(err) {
			return fmt.Sprintf("GetPod: %v", err)
		}
		if n := len(sandboxesOf(t, s.cri, pod.UID)); n != 0 {
			return fmt.Sprintf("%d sandboxes left", n)
		}
		if n := len(containersOf(t, s.cri, pod.UID)); n != 0 {
			return fmt.Sprintf("%d containers left", n)
		}
		return ""
	})
}

// terminalNotification waits for the terminal status the provider
// notifies after DeletePod.
func terminalNotification(t *testing.T, s *system, uid types.UID) *corev1.Pod {
	t.Helper()
	var final *corev1.Pod
	eventually(t, "a terminal status notified", func() string {
		seen := s.rec.notified(uid)
		if len(seen) == 0 {
			return "nothing notified"
		}
		last := seen[len(seen)-1]
		if last.Status.Phase != corev1.PodSucceeded && last.Status.Phase != corev1.PodFailed {
			return fmt.Sprintf("last phase %s", last.Status.Phase)
		}
		final = last
		return ""
	})
	return final
}

func TestPodControllerImagePullFailure(t *testing.T) {
	srv, cri := startCrisim(t)
	clk := testclock.NewFakeClock(time.Now())
	s := startSystem(t, srv, cri,
		provider.WithClock(clk),
		provider.WithPullOptions(asyncpull.WithClock(clk), asyncpull.WithBackOff(30*time.Second, time.Minute)))
	pod := newPod("broken", "uid-broken")
	pod.Spec.Containers = []corev1.Container{
		{Name: "app", Image: "registry.test/missing:1"},
		{Name: "ok", Image: toolsImage},
	}
	s.create(pod)

	failed := s.waitPod(pod.Name, "in ErrImagePull", func(p *corev1.Pod) string {
		if r := waitingReason(findStatus(p.Status.ContainerStatuses, "app")); r != asyncpull.ReasonErrImagePull {
			return "app waits with " + r
		}
		return ""
	})
	if failed.Status.Phase != corev1.PodPending {
		t.Errorf("phase %q, want Pending", failed.Status.Phase)
	}
	if msg := findStatus(failed.Status.ContainerStatuses, "app").State.Waiting.Message; msg == "" {
		t.Error("ErrImagePull without a message")
	}
	if got := condition(failed, corev1.PodReady); got != corev1.ConditionFalse {
		t.Errorf("Ready %q, want False", got)
	}

	// The next sync (the provider's clock decides when) finds the image in
	// back-off. The clock is stepped while the test waits, as time would
	// pass.
	backoff := s.waitPod(pod.Name, "in ImagePullBackOff", func(p *corev1.Pod) string {
		if r := waitingReason(findStatus(p.Status.ContainerStatuses, "app")); r != asyncpull.ReasonImagePullBackOff {
			if clk.HasWaiters() {
				clk.Step(2 * time.Second)
			}
			return "app waits with " + r
		}
		return ""
	})
	if ok := findStatus(backoff.Status.ContainerStatuses, "ok"); ok == nil || ok.State.Running == nil {
		t.Errorf("the other container does not run: %+v", ok)
	}
	if backoff.Status.Phase != corev1.PodPending {
		t.Errorf("phase %q, want Pending", backoff.Status.Phase)
	}
	deletePod(t, s, backoff)
	terminalNotification(t, s, pod.UID)
}

func TestPodControllerCrashLoopBackOff(t *testing.T) {
	srv, cri := startCrisim(t)
	clk := testclock.NewFakeClock(time.Now())
	s := startSystem(t, srv, cri, provider.WithClock(clk))
	pod := newPod("crasher", "uid-crasher")
	pod.Annotations = map[string]string{provider.AnnotationContainerAnnotations: `{"app": {"` +
		crisim.AnnotationExitAfter + `": "50ms", "` + crisim.AnnotationExitCode + `": "3"}}`}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: toolsImage}}
	s.create(pod)

	// First exit: restarted at once; second: back-off.
	loop := s.waitPod(pod.Name, "in CrashLoopBackOff", func(p *corev1.Pod) string {
		cs := findStatus(p.Status.ContainerStatuses, "app")
		if waitingReason(cs) != podcri.ReasonCrashLoopBackOff {
			return fmt.Sprintf("app %+v", cs)
		}
		return ""
	})
	cs := findStatus(loop.Status.ContainerStatuses, "app")
	if cs.RestartCount != 1 {
		t.Errorf("restart count %d, want 1", cs.RestartCount)
	}
	if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 3 || last.Reason != podcri.ReasonError {
		t.Errorf("last state %+v, want terminated Error exit 3", cs.LastTerminationState)
	}
	if !strings.Contains(cs.State.Waiting.Message, "back-off 10s") {
		t.Errorf("message %q", cs.State.Waiting.Message)
	}
	if loop.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %q, want Running (restartPolicy Always)", loop.Status.Phase)
	}

	// After the back-off it runs again. The back-off counts from the
	// container's finish time, which the simulated runtime takes from the
	// real clock, a little ahead of the fake one: the clock is stepped
	// while the test waits, as time would pass, no more than a second at
	// a time, and the restart must not come before the back-off.
	stepped := time.Duration(0)
	s.waitPod(pod.Name, "restarted twice", func(p *corev1.Pod) string {
		cs := findStatus(p.Status.ContainerStatuses, "app")
		if cs == nil || cs.RestartCount < 2 {
			if clk.HasWaiters() {
				clk.Step(time.Second)
				stepped += time.Second
			}
			return fmt.Sprintf("app %+v", cs)
		}
		return ""
	})
	if stepped < provider.DefaultCrashBackOffInitial {
		t.Errorf("restarted after %s of back-off, want at least %s", stepped, provider.DefaultCrashBackOffInitial)
	}
}

func TestPodControllerRunToCompletion(t *testing.T) {
	srv, cri := startCrisim(t)
	s := startSystem(t, srv, cri)
	pod := newPod("job", "uid-job")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Annotations = map[string]string{provider.AnnotationContainerAnnotations: `{"step": {"` +
		crisim.AnnotationExitAfter + `": "10ms"}, "main": {"` + crisim.AnnotationExitAfter + `": "20ms"}}`}
	pod.Spec.InitContainers = []corev1.Container{{Name: "step", Image: toolsImage}}
	pod.Spec.Containers = []corev1.Container{{Name: "main", Image: toolsImage}}
	s.create(pod)
	done := s.waitPod(pod.Name, "Succeeded", func(p *corev1.Pod) string {
		if p.Status.Phase != corev1.PodSucceeded {
			return "phase " + string(p.Status.Phase)
		}
		return ""
	})
	cs := findStatus(done.Status.ContainerStatuses, "main")
	if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.Reason != podcri.ReasonCompleted {
		t.Errorf("main: %+v, want terminated Completed", cs)
	}
	for _, c := range done.Status.Conditions {
		if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && (c.Status != corev1.ConditionFalse || c.Reason != "PodCompleted") {
			t.Errorf("condition %s = %s (%s), want False PodCompleted", c.Type, c.Status, c.Reason)
		}
	}
	eventually(t, "the sandbox stopped", func() string {
		for _, sb := range sandboxesOf(t, cri, pod.UID) {
			if sb.GetState() != 1 { // SANDBOX_NOTREADY
				return "sandbox still ready"
			}
		}
		return ""
	})
}

func TestPodControllerRemovedFromAPI(t *testing.T) {
	srv, cri := startCrisim(t)
	s := startSystem(t, srv, cri)
	pod := newPod("gone", "uid-gone")
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: toolsImage}}
	s.create(pod)
	s.waitPod(pod.Name, "running", func(p *corev1.Pod) string {
		if p.Status.Phase != corev1.PodRunning {
			return "phase " + string(p.Status.Phase)
		}
		return ""
	})
	// A force delete (grace 0): the pod vanishes from the API at once and
	// the PodController tells the provider.
	var zero int64
	if err := s.client.CoreV1().Pods(testNamespace).Delete(s.ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod stopped in the runtime", func() string {
		if n := len(sandboxesOf(t, cri, pod.UID)); n != 0 {
			return fmt.Sprintf("%d sandboxes", n)
		}
		return ""
	})
	terminalNotification(t, s, pod.UID)
}

// Many pods at once, some with init containers and sidecars, on a runtime
// with realistic latencies and a store lock: all run, all go.
func TestPodControllerManyPods(t *testing.T) {
	srv, cri := startCrisim(t, crisim.WithRealisticLatencies(), crisim.WithStoreLock(), crisim.WithSeed(7))
	s := startSystem(t, srv, cri)
	const n = 16
	var pods []*corev1.Pod
	for i := range n {
		name := fmt.Sprintf("many-%02d", i)
		var pod *corev1.Pod
		if i%2 == 0 {
			pod = newPod(name, types.UID("uid-"+name))
			pod.Annotations = map[string]string{provider.AnnotationContainerAnnotations: `{"migrate": {"` + crisim.AnnotationExitAfter + `": "50ms"}}`}
			pod.Spec.InitContainers = []corev1.Container{
				{Name: "migrate", Image: toolsImage},
				{Name: "proxy", Image: toolsImage, RestartPolicy: sidecarPolicy()},
			}
			pod.Spec.Containers = []corev1.Container{{Name: "app", Image: appImage}, {Name: "worker", Image: toolsImage}}
		} else {
			pod = newPod(name, types.UID("uid-"+name))
			pod.Spec.Containers = []corev1.Container{{Name: "app", Image: appImage}}
		}
		pods = append(pods, s.create(pod))
	}
	for _, pod := range pods {
		running := s.waitPod(pod.Name, "running", func(p *corev1.Pod) string {
			if p.Status.Phase != corev1.PodRunning || condition(p, corev1.PodReady) != corev1.ConditionTrue {
				return fmt.Sprintf("phase %s ready %s", p.Status.Phase, condition(p, corev1.PodReady))
			}
			return ""
		})
		if len(pod.Spec.InitContainers) > 0 {
			checkRunning(t, running, []string{"migrate"}, []string{"proxy"}, []string{"app", "worker"})
		} else {
			checkRunning(t, running, nil, nil, []string{"app"})
		}
	}
	if d := srv.Runtime().Downloads(appImage); d != 1 {
		t.Errorf("%d downloads of the shared image, want 1", d)
	}
	var zero int64
	for _, pod := range pods {
		if err := s.client.CoreV1().Pods(testNamespace).Delete(s.ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every pod gone from the provider and the runtime", func() string {
		if got, _ := s.prov.GetPods(context.Background()); len(got) != 0 {
			return fmt.Sprintf("%d pods in the provider", len(got))
		}
		for _, pod := range pods {
			if len(sandboxesOf(t, cri, pod.UID))+len(containersOf(t, cri, pod.UID)) != 0 {
				return pod.Name + " still in the runtime"
			}
		}
		return ""
	})
}
