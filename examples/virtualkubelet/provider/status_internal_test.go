package provider

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/pleg"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const sandbox = "sb1"

func running(name string, attempt uint32) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{
		Id: name + "-" + string(rune('0'+attempt)), Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		State: runtimeapi.ContainerState_CONTAINER_RUNNING, ImageRef: "sha256:abc",
		CreatedAt: t0.UnixNano() + int64(attempt), StartedAt: t0.Add(time.Second).UnixNano(),
		Labels: map[string]string{labelSandboxID: sandbox},
	}
}

func exited(name string, attempt uint32, code int32, reason string) *runtimeapi.ContainerStatus {
	cs := running(name, attempt)
	cs.State, cs.ExitCode, cs.Reason, cs.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, code, reason, t0.Add(2*time.Second).UnixNano()
	return cs
}

func podStatus(cs ...*runtimeapi.ContainerStatus) *pleg.PodStatus {
	return &pleg.PodStatus{
		SandboxStatuses:   []*runtimeapi.PodSandboxStatus{{Id: sandbox, State: runtimeapi.PodSandboxState_SANDBOX_READY, Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.7"}}},
		ContainerStatuses: cs,
	}
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

func TestBuildStatus(t *testing.T) {
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	cases := []struct {
		name      string
		pod       *corev1.Pod
		rt        *pleg.PodStatus
		sandboxID string
		reasons   map[string]waiting
		terminal  bool
		phase     corev1.PodPhase
		waiting   string // first regular container's waiting reason
		ready     corev1.ConditionStatus
		init      corev1.ConditionStatus
		sbReady   corev1.ConditionStatus
	}{
		{name: "nothing yet", pod: specPod(corev1.RestartPolicyAlways, nil, "a"),
			phase: corev1.PodPending, waiting: ReasonContainerCreating, ready: F, init: T, sbReady: F},
		{name: "init running", pod: specPod(corev1.RestartPolicyAlways, []string{"i"}, "a"), rt: podStatus(running("i", 0)), sandboxID: sandbox,
			phase: corev1.PodPending, waiting: ReasonPodInitializing, ready: F, init: F, sbReady: T},
		{name: "running", pod: specPod(corev1.RestartPolicyAlways, []string{"i"}, "a"), rt: podStatus(running("a", 0), exited("i", 0, 0, "")), sandboxID: sandbox,
			phase: corev1.PodRunning, ready: T, init: T, sbReady: T},
		{name: "init failed, Never", pod: specPod(corev1.RestartPolicyNever, []string{"i"}, "a"), rt: podStatus(exited("i", 0, 1, "Error")), sandboxID: sandbox,
			phase: corev1.PodFailed, waiting: ReasonPodInitializing, ready: F, init: F, sbReady: T},
		{name: "init failed, OnFailure, backing off", pod: specPod(corev1.RestartPolicyOnFailure, []string{"i"}, "a"), rt: podStatus(exited("i", 0, 1, "Error")), sandboxID: sandbox,
			reasons: map[string]waiting{"i": {reason: ReasonCrashLoopBackOff}},
			phase:   corev1.PodPending, waiting: ReasonPodInitializing, ready: F, init: F, sbReady: T},
		{name: "crash loop, Always", pod: specPod(corev1.RestartPolicyAlways, nil, "a"), rt: podStatus(exited("a", 1, 2, "Error"), exited("a", 0, 2, "Error")), sandboxID: sandbox,
			reasons: map[string]waiting{"a": {reason: ReasonCrashLoopBackOff}},
			phase:   corev1.PodRunning, waiting: ReasonCrashLoopBackOff, ready: F, init: T, sbReady: T},
		{name: "completed, Never", pod: specPod(corev1.RestartPolicyNever, nil, "a", "b"), rt: podStatus(exited("a", 0, 0, ""), exited("b", 0, 0, "Completed")), sandboxID: sandbox,
			phase: corev1.PodSucceeded, ready: F, init: T, sbReady: T},
		{name: "one failed, Never", pod: specPod(corev1.RestartPolicyNever, nil, "a", "b"), rt: podStatus(exited("a", 0, 0, ""), exited("b", 0, 1, "Error")), sandboxID: sandbox,
			phase: corev1.PodFailed, ready: F, init: T, sbReady: T},
		{name: "image pull failure", pod: specPod(corev1.RestartPolicyAlways, nil, "a"), rt: podStatus(), sandboxID: sandbox,
			reasons: map[string]waiting{"a": {reason: "ErrImagePull", message: "not found"}},
			phase:   corev1.PodPending, waiting: "ErrImagePull", ready: F, init: T, sbReady: T},
		{name: "deleted while running", pod: specPod(corev1.RestartPolicyAlways, nil, "a"), rt: podStatus(exited("a", 0, 0, "Completed")), sandboxID: sandbox, terminal: true,
			phase: corev1.PodSucceeded, ready: F, init: T, sbReady: F},
		{name: "deleted before it ran", pod: specPod(corev1.RestartPolicyAlways, nil, "a"), terminal: true,
			phase: corev1.PodFailed, ready: F, init: T, sbReady: F},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := buildStatus(&statusInput{pod: tc.pod, runtime: tc.rt, sandboxID: tc.sandboxID, reasons: tc.reasons,
				terminal: tc.terminal, runtimeName: "containerd", startTime: t0, now: t0})
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
			if st.StartTime == nil || !st.StartTime.Time.Equal(t0) {
				t.Errorf("start time %v", st.StartTime)
			}
		})
	}
}

func TestBuildStatusContainerDetails(t *testing.T) {
	pod := specPod(corev1.RestartPolicyAlways, nil, "a")
	st := buildStatus(&statusInput{pod: pod, runtime: podStatus(running("a", 2), exited("a", 1, 137, "OOMKilled")), sandboxID: sandbox,
		runtimeName: "containerd", now: t0})
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
	later := buildStatus(&statusInput{pod: pod, runtime: podStatus(running("a", 2)), sandboxID: sandbox, runtimeName: "containerd",
		prev: &st, now: t0.Add(time.Hour)})
	for i, c := range later.Conditions {
		if !c.LastTransitionTime.Equal(&st.Conditions[i].LastTransitionTime) {
			t.Errorf("%s moved from %v to %v", c.Type, st.Conditions[i].LastTransitionTime, c.LastTransitionTime)
		}
	}
	// And move when it changes.
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	stopped := buildStatus(&statusInput{pod: pod, runtime: podStatus(exited("a", 2, 1, "Error")), sandboxID: sandbox, runtimeName: "containerd",
		prev: &st, now: t0.Add(time.Hour)})
	for _, c := range stopped.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.Equal(&metav1.Time{Time: t0.Add(time.Hour)}) {
			t.Errorf("Ready turned False but its transition time is %v", c.LastTransitionTime)
		}
	}
	if stopped.Conditions[len(stopped.Conditions)-1].Type != corev1.PodScheduled {
		t.Error("PodScheduled condition dropped")
	}
}
