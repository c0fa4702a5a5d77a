package podcri_test

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
)

var st0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const sandbox = "sb1"

func running(name string, attempt uint32) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{
		Id: name + "-" + string(rune('0'+attempt)), Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		State: runtimeapi.ContainerState_CONTAINER_RUNNING, ImageRef: "sha256:abc",
		CreatedAt: st0.UnixNano() + int64(attempt), StartedAt: st0.Add(time.Second).UnixNano(),
	}
}

func exited(name string, attempt uint32, code int32, reason string) *runtimeapi.ContainerStatus {
	cs := running(name, attempt)
	cs.State, cs.ExitCode, cs.Reason, cs.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, code, reason, st0.Add(2*time.Second).UnixNano()
	return cs
}

// runtimeState is what the runtime shows of a pod: its sandbox and
// container instances.
type runtimeState struct {
	sandbox    *runtimeapi.PodSandboxStatus
	containers []*runtimeapi.ContainerStatus
}

func podStatus(cs ...*runtimeapi.ContainerStatus) *runtimeState {
	return &runtimeState{
		sandbox:    &runtimeapi.PodSandboxStatus{Id: sandbox, State: runtimeapi.PodSandboxState_SANDBOX_READY, Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.7"}},
		containers: cs,
	}
}

// build is podcri.PodStatus of pod with rt as the runtime's state.
func build(t *testing.T, in podcri.StatusInput, rt *runtimeState) corev1.PodStatus {
	t.Helper()
	if rt != nil {
		in.Sandbox, in.Containers = rt.sandbox, rt.containers
	}
	st, err := podcri.PodStatus(in)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func specPod(policy corev1.RestartPolicy, init []string, regular ...string) *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: policy}}
	for _, n := range init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: n, Image: "img"})
	}
	for _, n := range regular {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "img"})
	}
	return pod
}

func conds(st corev1.PodStatus) map[corev1.PodConditionType]corev1.ConditionStatus {
	m := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range st.Conditions {
		m[c.Type] = c.Status
	}
	return m
}

func TestPodStatus(t *testing.T) {
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	cases := []struct {
		name      string
		pod       *corev1.Pod
		rt        *runtimeState
		sandboxID string
		reasons   map[string]podcri.Waiting
		terminal  bool
		phase     corev1.PodPhase
		waiting   string // first regular container's waiting reason
		ready     corev1.ConditionStatus
		init      corev1.ConditionStatus
		sbReady   corev1.ConditionStatus
	}{
		{name: "nothing yet", pod: specPod(corev1.RestartPolicyAlways, nil, "a"),
			phase: corev1.PodPending, waiting: podcri.ReasonContainerCreating, ready: F, init: T, sbReady: F},
		{name: "init running", pod: specPod(corev1.RestartPolicyAlways, []string{"i"}, "a"), rt: podStatus(running("i", 0)), sandboxID: sandbox,
			phase: corev1.PodPending, waiting: podcri.ReasonPodInitializing, ready: F, init: F, sbReady: T},
		{name: "running", pod: specPod(corev1.RestartPolicyAlways, []string{"i"}, "a"), rt: podStatus(running("a", 0), exited("i", 0, 0, "")), sandboxID: sandbox,
			phase: corev1.PodRunning, ready: T, init: T, sbReady: T},
		{name: "init failed, Never", pod: specPod(corev1.RestartPolicyNever, []string{"i"}, "a"), rt: podStatus(exited("i", 0, 1, "Error")), sandboxID: sandbox,
			phase: corev1.PodFailed, waiting: podcri.ReasonPodInitializing, ready: F, init: F, sbReady: T},
		{name: "init failed, OnFailure, backing off", pod: specPod(corev1.RestartPolicyOnFailure, []string{"i"}, "a"), rt: podStatus(exited("i", 0, 1, "Error")), sandboxID: sandbox,
			reasons: map[string]podcri.Waiting{"i": {Reason: podcri.ReasonCrashLoopBackOff}},
			phase:   corev1.PodPending, waiting: podcri.ReasonPodInitializing, ready: F, init: F, sbReady: T},
		{name: "crash loop, Always", pod: specPod(corev1.RestartPolicyAlways, nil, "a"), rt: podStatus(exited("a", 1, 2, "Error"), exited("a", 0, 2, "Error")), sandboxID: sandbox,
			reasons: map[string]podcri.Waiting{"a": {Reason: podcri.ReasonCrashLoopBackOff}},
			phase:   corev1.PodRunning, waiting: podcri.ReasonCrashLoopBackOff, ready: F, init: T, sbReady: T},
		{name: "completed, Never", pod: specPod(corev1.RestartPolicyNever, nil, "a", "b"), rt: podStatus(exited("a", 0, 0, ""), exited("b", 0, 0, "Completed")), sandboxID: sandbox,
			phase: corev1.PodSucceeded, ready: F, init: T, sbReady: T},
		{name: "one failed, Never", pod: specPod(corev1.RestartPolicyNever, nil, "a", "b"), rt: podStatus(exited("a", 0, 0, ""), exited("b", 0, 1, "Error")), sandboxID: sandbox,
			phase: corev1.PodFailed, ready: F, init: T, sbReady: T},
		{name: "image pull failure", pod: specPod(corev1.RestartPolicyAlways, nil, "a"), rt: podStatus(), sandboxID: sandbox,
			reasons: map[string]podcri.Waiting{"a": {Reason: "ErrImagePull", Message: "not found"}},
			phase:   corev1.PodPending, waiting: "ErrImagePull", ready: F, init: T, sbReady: T},
		{name: "deleted while running", pod: specPod(corev1.RestartPolicyAlways, nil, "a"), rt: podStatus(exited("a", 0, 0, "Completed")), sandboxID: sandbox, terminal: true,
			phase: corev1.PodSucceeded, ready: F, init: T, sbReady: F},
		{name: "deleted before it ran", pod: specPod(corev1.RestartPolicyAlways, nil, "a"), terminal: true,
			phase: corev1.PodFailed, ready: F, init: T, sbReady: F},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := build(t, podcri.StatusInput{Pod: tc.pod, SandboxID: tc.sandboxID, Waiting: tc.reasons,
				Terminal: tc.terminal, RuntimeName: "containerd", StartTime: st0, Now: st0}, tc.rt)
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s", st.Phase, tc.phase)
			}
			c := st.ContainerStatuses[0]
			got := ""
			if c.State.Waiting != nil {
				got = c.State.Waiting.Reason
			}
			if got != tc.waiting {
				t.Errorf("waiting reason %q, want %q", got, tc.waiting)
			}
			m := conds(st)
			if m[corev1.PodReady] != tc.ready || m[corev1.ContainersReady] != tc.ready || m[corev1.PodInitialized] != tc.init || m[corev1.PodReadyToStartContainers] != tc.sbReady {
				t.Errorf("conditions %v, want ready %s initialized %s sandbox %s", m, tc.ready, tc.init, tc.sbReady)
			}
			if st.StartTime == nil || !st.StartTime.Time.Equal(st0) {
				t.Errorf("start time %v", st.StartTime)
			}
		})
	}
}

func TestPodStatusContainerDetails(t *testing.T) {
	pod := specPod(corev1.RestartPolicyAlways, nil, "a")
	st := build(t, podcri.StatusInput{Pod: pod, SandboxID: sandbox, RuntimeName: "containerd", Now: st0},
		podStatus(running("a", 2), exited("a", 1, 137, "OOMKilled")))
	c := st.ContainerStatuses[0]
	if c.RestartCount != 2 || c.ContainerID != "containerd://a-2" || c.ImageID != "sha256:abc" || !c.Ready || c.Started == nil || !*c.Started {
		t.Errorf("status %+v", c)
	}
	if last := c.LastTerminationState.Terminated; last == nil || last.Reason != "OOMKilled" || last.ExitCode != 137 || last.ContainerID != "containerd://a-1" {
		t.Errorf("last state %+v", c.LastTerminationState)
	}
	if st.PodIP != "10.0.0.7" {
		t.Errorf("pod IP %q", st.PodIP)
	}
	// Transition times stay while a condition keeps its status.
	later := build(t, podcri.StatusInput{Pod: pod, SandboxID: sandbox, RuntimeName: "containerd",
		Previous: &st, Now: st0.Add(time.Hour)}, podStatus(running("a", 2)))
	for i, c := range later.Conditions {
		if !c.LastTransitionTime.Equal(&st.Conditions[i].LastTransitionTime) {
			t.Errorf("%s moved from %v to %v", c.Type, st.Conditions[i].LastTransitionTime, c.LastTransitionTime)
		}
	}
	// And move when it changes.
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	stopped := build(t, podcri.StatusInput{Pod: pod, SandboxID: sandbox, RuntimeName: "containerd",
		Previous: &st, Now: st0.Add(time.Hour)}, podStatus(exited("a", 2, 1, "Error")))
	for _, c := range stopped.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.Equal(&metav1.Time{Time: st0.Add(time.Hour)}) {
			t.Errorf("Ready turned False but its transition time is %v", c.LastTransitionTime)
		}
	}
	if stopped.Conditions[len(stopped.Conditions)-1].Type != corev1.PodScheduled {
		t.Error("PodScheduled condition dropped")
	}
}

func TestPodStatusProbesAndMemory(t *testing.T) {
	// The kubelet's status manager: a running container is ready only once
	// its readiness probe passed, and a sidecar whose startup probe has not
	// passed keeps the pod Initialized=False.
	unready := func(*runtimeapi.ContainerStatus) (bool, bool) { return true, false }
	pod := specPod(corev1.RestartPolicyAlways, nil, "a")
	st := build(t, podcri.StatusInput{Pod: pod, SandboxID: sandbox, Probe: unready, Now: st0}, podStatus(running("a", 0)))
	if c := st.ContainerStatuses[0]; c.Ready || !*c.Started {
		t.Errorf("unready container reported ready %v started %v", c.Ready, *c.Started)
	}
	if m := conds(st); m[corev1.PodReady] != corev1.ConditionFalse || st.Phase != corev1.PodRunning {
		t.Errorf("conditions %v phase %s, want not ready and Running", m, st.Phase)
	}
	if c := st.Conditions[3]; c.Message != "containers with unready status: [a]" || c.Reason != "ContainersNotReady" {
		t.Errorf("Ready condition %+v", c)
	}

	always := corev1.ContainerRestartPolicyAlways
	withSidecar := specPod(corev1.RestartPolicyAlways, []string{"side"}, "a")
	withSidecar.Spec.InitContainers[0].RestartPolicy = &always
	notStarted := func(*runtimeapi.ContainerStatus) (bool, bool) { return false, false }
	st = build(t, podcri.StatusInput{Pod: withSidecar, SandboxID: sandbox, Probe: notStarted, Now: st0}, podStatus(running("side", 0)))
	if m := conds(st); m[corev1.PodInitialized] != corev1.ConditionFalse {
		t.Errorf("sidecar not started yet, conditions %v", m)
	}

	// A restarted container's previous instance, removed from the runtime,
	// stays its lastState from the caller's memory.
	le := exited("a", 0, 2, "")
	st = build(t, podcri.StatusInput{Pod: pod, SandboxID: sandbox, RuntimeName: "containerd", Now: st0,
		LastExited: map[string]*runtimeapi.ContainerStatus{"a": le}}, podStatus(running("a", 1)))
	if c := st.ContainerStatuses[0]; c.LastTerminationState.Terminated == nil || c.LastTerminationState.Terminated.Reason != podcri.ReasonError || c.RestartCount != 1 {
		t.Errorf("lastState %+v restarts %d", c.LastTerminationState, c.RestartCount)
	}

	// A deleted pod whose container's end was not seen.
	st = build(t, podcri.StatusInput{Pod: pod, Terminal: true, Now: st0}, podStatus(running("a", 0)))
	if term := st.ContainerStatuses[0].State.Terminated; term == nil || term.Reason != podcri.ReasonContainerStatusUnknown || term.ExitCode != 137 {
		t.Errorf("terminal state %+v", st.ContainerStatuses[0].State)
	}
	if st.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("QOS class %q, want BestEffort from the spec", st.QOSClass)
	}

	// The kubelet's regular init container is ready once it succeeded,
	// never while it runs.
	withInit := specPod(corev1.RestartPolicyAlways, []string{"i"}, "a")
	st = build(t, podcri.StatusInput{Pod: withInit, SandboxID: sandbox, Now: st0}, podStatus(running("i", 0)))
	if st.InitContainerStatuses[0].Ready {
		t.Error("a running init container is reported ready")
	}
	st = build(t, podcri.StatusInput{Pod: withInit, SandboxID: sandbox, Now: st0}, podStatus(exited("i", 0, 0, ""), running("a", 0)))
	if !st.InitContainerStatuses[0].Ready {
		t.Error("a succeeded init container is reported not ready")
	}

	var ae *podcri.ArgError
	if _, err := podcri.PodStatus(podcri.StatusInput{}); !errors.As(err, &ae) {
		t.Errorf("nil pod: %v, want *ArgError", err)
	}
}
