package provider_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncpod/syncpod/criclient/podcri"
	"github.com/syncpod/syncpod/examples/virtualkubelet/provider"
)

// notifications collects what NotifyPods delivers.
type notifications chan *corev1.Pod

func (n notifications) waitFor(t *testing.T, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var got, last *corev1.Pod
	eventually(t, what, func() string {
		for {
			select {
			case p := <-n:
				if cond(p) {
					got = p
					return ""
				}
				last = p
			default:
				if last == nil {
					return "not yet notified"
				}
				return fmt.Sprintf("last notified: phase %s, containers %+v", last.Status.Phase, last.Status.ContainerStatuses)
			}
		}
	})
	return got
}

func TestCreatePodReturnsWhilePullHangs(t *testing.T) {
	srv, cri := startCrisim(t)
	p := newProvider(t, cri)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notified := make(notifications, 1000)
	p.NotifyPods(ctx, func(pod *corev1.Pod) { notified <- pod })

	srv.Runtime().HangNext("PullImage", 1) // until its context ends
	pod := newPod("slow", "uid-slow")
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: appImage}}
	if err := p.CreatePod(ctx, pod); err != nil { // returns although the pull never ends
		t.Fatal(err)
	}
	got, err := p.GetPod(ctx, testNamespace, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.PodPending {
		t.Errorf("phase %q, want Pending", got.Status.Phase)
	}
	eventually(t, "the pull in flight", func() string {
		if n := srv.Runtime().InFlight("PullImage"); n != 1 {
			return fmt.Sprintf("%d pulls in flight", n)
		}
		return ""
	})
	got, _ = p.GetPod(ctx, testNamespace, "slow")
	if r := waitingReason(findStatus(got.Status.ContainerStatuses, "app")); r != podcri.ReasonContainerCreating {
		t.Errorf("app waits with %q, want ContainerCreating", r)
	}
	if c := condition(got, corev1.PodReadyToStartContainers); c != corev1.ConditionTrue {
		t.Errorf("PodReadyToStartContainers %q while the sandbox runs", c)
	}

	// Deleting the pod cancels its pull and notifies a terminal status.
	if err := p.DeletePod(ctx, got); err != nil {
		t.Fatal(err)
	}
	if _, err := p.GetPod(ctx, testNamespace, "slow"); !errdefs.IsNotFound(err) {
		t.Errorf("GetPod after DeletePod: %v, want NotFound", err)
	}
	final := notified.waitFor(t, "a terminal status", func(pod *corev1.Pod) bool {
		return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
	})
	if final.Status.Phase != corev1.PodFailed {
		t.Errorf("final phase %q, want Failed (the container never ran)", final.Status.Phase)
	}
	if cs := findStatus(final.Status.ContainerStatuses, "app"); cs == nil || cs.State.Terminated == nil || cs.State.Terminated.Reason != podcri.ReasonContainerStatusUnknown {
		t.Errorf("final app status %+v", cs)
	}
	eventually(t, "the pull cancelled", func() string {
		if n := srv.Runtime().InFlight("PullImage"); n != 0 {
			return fmt.Sprintf("%d pulls in flight", n)
		}
		return ""
	})
}

func TestProviderErrors(t *testing.T) {
	_, cri := startCrisim(t)
	p := newProvider(t, cri)
	ctx := context.Background()
	ok := newPod("ok", "uid-ok")
	ok.Spec.Containers = []corev1.Container{{Name: "app", Image: toolsImage}}
	if err := p.CreatePod(ctx, ok); err != nil {
		t.Fatal(err)
	}
	withSpec := func(name string, f func(*corev1.Pod)) *corev1.Pod {
		pod := newPod(name, types.UID("uid-"+name))
		pod.Spec.Containers = []corev1.Container{{Name: "app", Image: toolsImage}}
		f(pod)
		return pod
	}
	invalid := map[string]*corev1.Pod{
		"nil":            nil,
		"no uid":         withSpec("nouid", func(p *corev1.Pod) { p.UID = "" }),
		"no containers":  withSpec("empty", func(p *corev1.Pod) { p.Spec.Containers = nil }),
		"duplicate name": withSpec("dup", func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "app", Image: toolsImage}} }),
		"no image":       withSpec("noimage", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }),
		"bad annotation": withSpec("badann", func(p *corev1.Pod) {
			p.Annotations = map[string]string{provider.AnnotationContainerAnnotations: "[1]"}
		}),
		"start order cycle": withSpec("cycle", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b", Image: toolsImage})
			p.Annotations = map[string]string{"concurrentstart.syncpod.io/start-after": `{"app": ["b"], "b": ["app"]}`}
		}),
		"name taken": withSpec("ok", func(p *corev1.Pod) { p.UID = "uid-other" }),
	}
	for name, pod := range invalid {
		if err := p.CreatePod(ctx, pod); !errdefs.IsInvalidInput(err) {
			t.Errorf("CreatePod(%s) = %v, want InvalidInput", name, err)
		}
	}
	if err := p.CreatePod(ctx, ok); err != nil {
		t.Errorf("CreatePod of a known pod again = %v, want nil", err)
	}
	unknown := withSpec("unknown", func(*corev1.Pod) {})
	if _, err := p.GetPod(ctx, testNamespace, "unknown"); !errdefs.IsNotFound(err) {
		t.Errorf("GetPod = %v, want NotFound", err)
	}
	if _, err := p.GetPodStatus(ctx, testNamespace, "unknown"); !errdefs.IsNotFound(err) {
		t.Errorf("GetPodStatus = %v, want NotFound", err)
	}
	if err := p.UpdatePod(ctx, unknown); !errdefs.IsNotFound(err) {
		t.Errorf("UpdatePod = %v, want NotFound", err)
	}
	if err := p.DeletePod(ctx, unknown); !errdefs.IsNotFound(err) {
		t.Errorf("DeletePod = %v, want NotFound", err)
	}
	if err := p.DeletePod(ctx, &corev1.Pod{}); !errdefs.IsInvalidInput(err) {
		t.Errorf("DeletePod(empty) = %v, want InvalidInput", err)
	}
	if err := p.UpdatePod(ctx, withSpec("ok", func(p *corev1.Pod) { p.Spec.Containers = nil })); !errdefs.IsInvalidInput(err) {
		t.Errorf("UpdatePod(no containers) = %v, want InvalidInput", err)
	}
	_ = p.Close()
	if err := p.CreatePod(ctx, withSpec("late", func(*corev1.Pod) {})); err != provider.ErrClosed {
		t.Errorf("CreatePod after Close = %v, want ErrClosed", err)
	}
}

func TestUpdatePodRestartsChangedContainer(t *testing.T) {
	srv, cri := startCrisim(t)
	p := newProvider(t, cri)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notified := make(notifications, 1000)
	p.NotifyPods(ctx, func(pod *corev1.Pod) { notified <- pod })
	pod := newPod("upd", "uid-upd")
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: toolsImage}, {Name: "side", Image: toolsImage}}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	runningWith := func(image string) func(*corev1.Pod) bool {
		return func(pod *corev1.Pod) bool {
			cs := findStatus(pod.Status.ContainerStatuses, "app")
			return pod.Status.Phase == corev1.PodRunning && cs != nil && cs.State.Running != nil && cs.Image == image &&
				condition(pod, corev1.PodReady) == corev1.ConditionTrue
		}
	}
	before := notified.waitFor(t, "running", runningWith(toolsImage))
	pod = pod.DeepCopy()
	pod.Spec.Containers[0].Image = appImage
	if err := p.UpdatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	after := notified.waitFor(t, "running the new image", func(pod *corev1.Pod) bool {
		cs := findStatus(pod.Status.ContainerStatuses, "app")
		return runningWith(appImage)(pod) && cs.ContainerID != findStatus(before.Status.ContainerStatuses, "app").ContainerID
	})
	if a, b := findStatus(after.Status.ContainerStatuses, "app").ImageID, findStatus(before.Status.ContainerStatuses, "app").ImageID; a == b {
		t.Errorf("image ID unchanged: %s", a)
	}
	if a, b := findStatus(after.Status.ContainerStatuses, "side").ContainerID, findStatus(before.Status.ContainerStatuses, "side").ContainerID; a != b {
		t.Errorf("the unchanged container was restarted: %s -> %s", b, a)
	}
	if n := srv.Runtime().Downloads(appImage); n != 1 {
		t.Errorf("%d downloads of the new image, want 1", n)
	}
}

// The callback may call back into the provider: it is never called under
// a provider lock.
func TestNotifyPodsCallbackMayCallProvider(t *testing.T) {
	_, cri := startCrisim(t)
	p := newProvider(t, cri)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := make(chan struct{})
	var once bool
	p.NotifyPods(ctx, func(pod *corev1.Pod) {
		if _, err := p.GetPods(ctx); err != nil {
			t.Error(err)
		}
		if _, err := p.GetPod(ctx, pod.Namespace, pod.Name); err != nil && !errdefs.IsNotFound(err) {
			t.Error(err)
		}
		if err := p.UpdatePod(ctx, pod); err != nil && !errdefs.IsNotFound(err) {
			t.Error(err)
		}
		if pod.Status.Phase == corev1.PodRunning && !once {
			once = true
			close(running)
		}
	})
	pod := newPod("reentrant", "uid-reentrant")
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: toolsImage}}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "running notified", func() string {
		select {
		case <-running:
			return ""
		default:
			return "not yet"
		}
	})
}

// A scripted start failure shows RunContainerError, then the container
// is retried.
func TestStartErrorIsRetried(t *testing.T) {
	srv, cri := startCrisim(t)
	p := newProvider(t, cri, provider.WithCrashBackOff(10e6, 20e6)) // 10ms, 20ms: retried promptly
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notified := make(notifications, 1000)
	p.NotifyPods(ctx, func(pod *corev1.Pod) { notified <- pod })
	srv.Runtime().FailNext("StartContainer", 1, fmt.Errorf("boom"))
	pod := newPod("flaky", "uid-flaky")
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: toolsImage}}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	notified.waitFor(t, "RunContainerError", func(pod *corev1.Pod) bool {
		return waitingReason(findStatus(pod.Status.ContainerStatuses, "app")) == podcri.ReasonRunContainerError
	})
	notified.waitFor(t, "running after the retry", func(pod *corev1.Pod) bool {
		cs := findStatus(pod.Status.ContainerStatuses, "app")
		return cs != nil && cs.State.Running != nil
	})
}

// A sandbox that dies under a restartPolicy Always pod is replaced, and
// the containers start again in the new one.
func TestDeadSandboxIsReplaced(t *testing.T) {
	_, cri := startCrisim(t)
	p := newProvider(t, cri)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notified := make(notifications, 1000)
	p.NotifyPods(ctx, func(pod *corev1.Pod) { notified <- pod })
	pod := newPod("phoenix", "uid-phoenix")
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: toolsImage}}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	isRunning := func(pod *corev1.Pod) bool {
		cs := findStatus(pod.Status.ContainerStatuses, "app")
		return cs != nil && cs.State.Running != nil && condition(pod, corev1.PodReady) == corev1.ConditionTrue
	}
	notified.waitFor(t, "running", isRunning)
	sbs := sandboxesOf(t, cri, pod.UID)
	if len(sbs) != 1 {
		t.Fatalf("%d sandboxes", len(sbs))
	}
	if err := cri.StopPodSandbox(ctx, sbs[0].GetId()); err != nil { // the runtime lost it
		t.Fatal(err)
	}
	again := notified.waitFor(t, "running again", func(pod *corev1.Pod) bool {
		cs := findStatus(pod.Status.ContainerStatuses, "app")
		return isRunning(pod) && cs.RestartCount == 1
	})
	if last := findStatus(again.Status.ContainerStatuses, "app").LastTerminationState.Terminated; last == nil {
		t.Error("no last termination state after the restart")
	}
	ready := 0
	for _, sb := range sandboxesOf(t, cri, pod.UID) {
		if sb.GetState() == 0 { // SANDBOX_READY
			ready++
			if sb.GetMetadata().GetAttempt() != 1 {
				t.Errorf("new sandbox attempt %d, want 1", sb.GetMetadata().GetAttempt())
			}
		}
	}
	if ready != 1 {
		t.Errorf("%d ready sandboxes, want 1", ready)
	}
}

// A provider closed with pods running leaves them running, and the next
// provider on the same runtime adopts them as virtual-kubelet creates them
// again: no container restarted, no second sandbox, the pod Running and
// Ready.
func TestNewProviderAdoptsRunningPods(t *testing.T) {
	_, cri := startCrisim(t)
	pod := newPod("keeper", "uid-keeper")
	pod.Spec.Containers = []corev1.Container{{Name: "a", Image: toolsImage}, {Name: "b", Image: toolsImage}}
	isRunning := func(pod *corev1.Pod) bool {
		return pod.Status.Phase == corev1.PodRunning && condition(pod, corev1.PodReady) == corev1.ConditionTrue
	}
	ids := func() []string {
		var out []string
		for _, sb := range sandboxesOf(t, cri, pod.UID) {
			out = append(out, "sandbox "+sb.GetId()+" "+sb.GetState().String())
		}
		for _, c := range containersOf(t, cri, pod.UID) {
			out = append(out, "container "+c.GetId()+" "+c.GetState().String())
		}
		sort.Strings(out)
		return out
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	first := newProvider(t, cri)
	notified := make(notifications, 1000)
	first.NotifyPods(ctx, func(pod *corev1.Pod) { notified <- pod })
	if err := first.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	running := notified.waitFor(t, "running", isRunning)
	firstStart := running.Status.StartTime
	before := ids()
	// virtual-kubelet creates the pod again as the API server holds it,
	// with the status the first provider reported.
	pod.Status = running.Status
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := newProvider(t, cri)
	again := make(notifications, 1000)
	second.NotifyPods(ctx, func(pod *corev1.Pod) { again <- pod })
	if err := second.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	got := again.waitFor(t, "running after the restart", isRunning)
	if got.Status.StartTime == nil || (firstStart != nil && !got.Status.StartTime.Equal(firstStart)) {
		t.Errorf("start time %v after the restart, want the first run's %v", got.Status.StartTime, firstStart)
	}
	for _, cs := range got.Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			t.Errorf("%s restarted %d times", cs.Name, cs.RestartCount)
		}
	}
	if after := ids(); !slices.Equal(before, after) {
		t.Errorf("runtime changed across the restart:\nbefore %v\nafter  %v", before, after)
	}
}

// Ping stays nil while the runtime is down (Healthy says so), so that
// virtual-kubelet keeps renewing the Lease and can publish Ready=False;
// it fails only for an ended context.
func TestPingWhileRuntimeDown(t *testing.T) {
	srv, cri := startCrisim(t)
	if err := srv.Runtime().SetErrorRate("Status", 1, codes.Unavailable); err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, cri)
	deadline := time.Now().Add(waitTimeout)
	for p.Healthy() == nil {
		if time.Now().After(deadline) {
			t.Fatal("Healthy still nil with the runtime's Status failing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Ping(context.Background()); err != nil {
		t.Errorf("Ping while the runtime is down: %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Ping(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ping with an ended context: %v, want context.Canceled", err)
	}
}
