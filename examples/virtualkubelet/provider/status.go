package provider

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/pleg"
)

// Container state reasons, as the kubelet shows them. The image pull
// reasons (ErrImagePull, ImagePullBackOff, ...) are asyncpull's Reason
// constants.
const (
	// ReasonContainerCreating: the container is being created (its image
	// pulled) in a pod without init containers.
	ReasonContainerCreating = "ContainerCreating"
	// ReasonPodInitializing: the container waits for the pod's init
	// containers.
	ReasonPodInitializing = "PodInitializing"
	// ReasonCrashLoopBackOff: the container exited and waits out its
	// restart back-off.
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	// ReasonCreateContainerErr: CreateContainer failed.
	ReasonCreateContainerErr = "CreateContainerError"
	// ReasonRunContainerError: StartContainer failed.
	ReasonRunContainerError = "RunContainerError"
	// ReasonCompleted: the container exited 0 (when the runtime gives no
	// reason of its own).
	ReasonCompleted = "Completed"
	// ReasonError: the container exited non-zero (when the runtime gives no
	// reason of its own).
	ReasonError = "Error"
	// ReasonContainerStatusUnknown is the terminated reason of a container
	// whose end was not observed when its pod terminated.
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
	// ReasonFailedCreatePodSandBox is the pod's reason while its sandbox
	// cannot be created.
	ReasonFailedCreatePodSandBox = "FailedCreatePodSandBox"
)

// waiting is why a container is not running, as the worker last saw it.
type waiting struct {
	reason, message string
	since           time.Time // when the worker set it, on the provider's clock
}

// statusInput is everything a pod status is computed from.
type statusInput struct {
	pod         *corev1.Pod        // the desired pod (spec, and the status it came with)
	runtime     *pleg.PodStatus    // the runtime's view, nil if not yet inspected
	sandboxID   string             // the pod's current sandbox, "" if none yet
	reasons     map[string]waiting // per container name
	podReason   *waiting           // a pod-level failure (sandbox creation)
	startTime   time.Time          // when the provider accepted the pod
	runtimeName string             // scheme of container IDs
	nodeIP      string
	terminal    bool                                   // the pod will run nothing more (finished or deleted)
	prev        *corev1.PodStatus                      // the last status published, for transition times
	lastExited  map[string]*runtimeapi.ContainerStatus // newest exited instance per name the worker saw
	now         time.Time
}

// runtimeView indexes a pod's runtime status by container name.
type runtimeView struct {
	sandbox  *runtimeapi.PodSandboxStatus
	latest   map[string]*runtimeapi.ContainerStatus // newest instance in the current sandbox
	previous map[string]*runtimeapi.ContainerStatus // the instance before it (any sandbox)
	exited   map[string][]*runtimeapi.ContainerStatus
	attempts map[string]uint32 // highest attempt seen per name, any sandbox
	seen     map[string]bool
}

func newRuntimeView(st *pleg.PodStatus, sandboxID string) runtimeView {
	v := runtimeView{
		latest:   map[string]*runtimeapi.ContainerStatus{},
		previous: map[string]*runtimeapi.ContainerStatus{},
		exited:   map[string][]*runtimeapi.ContainerStatus{},
		attempts: map[string]uint32{},
		seen:     map[string]bool{},
	}
	if st == nil {
		return v
	}
	for _, sb := range st.SandboxStatuses {
		if sb.GetId() == sandboxID {
			v.sandbox = sb
		}
	}
	// Newest first, as the PLEG sorts them.
	for _, cs := range st.ContainerStatuses {
		name := cs.GetMetadata().GetName()
		if name == "" {
			continue
		}
		if a := cs.GetMetadata().GetAttempt(); !v.seen[name] || a > v.attempts[name] {
			v.attempts[name] = a
		}
		v.seen[name] = true
		if cs.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			v.exited[name] = append(v.exited[name], cs)
		}
		if _, ok := v.latest[name]; !ok && cs.GetLabels()[labelSandboxID] == sandboxID && sandboxID != "" {
			v.latest[name] = cs
			continue
		}
		if _, ok := v.latest[name]; ok {
			if _, ok := v.previous[name]; !ok {
				v.previous[name] = cs
			}
		}
	}
	return v
}

// nextAttempt is the attempt number of the next instance of name.
func (v runtimeView) nextAttempt(name string) uint32 {
	if !v.seen[name] {
		return 0
	}
	return v.attempts[name] + 1
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func nsTime(ns int64) metav1.Time {
	if ns == 0 {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(0, ns))
}

func terminatedState(cs *runtimeapi.ContainerStatus, runtimeName string) *corev1.ContainerStateTerminated {
	reason := cs.GetReason()
	if reason == "" {
		reason = ReasonCompleted
		if cs.GetExitCode() != 0 {
			reason = ReasonError
		}
	}
	return &corev1.ContainerStateTerminated{
		ExitCode:    cs.GetExitCode(),
		Reason:      reason,
		Message:     cs.GetMessage(),
		StartedAt:   nsTime(cs.GetStartedAt()),
		FinishedAt:  nsTime(cs.GetFinishedAt()),
		ContainerID: runtimeName + "://" + cs.GetId(),
	}
}

// containerStatus converts one container's runtime instances.
func containerStatus(in *statusInput, v runtimeView, spec *corev1.Container, defaultWaiting string) corev1.ContainerStatus {
	started := false
	out := corev1.ContainerStatus{Name: spec.Name, Image: spec.Image, Started: &started}
	latest := v.latest[spec.Name]
	reason, hasReason := in.reasons[spec.Name]
	if in.terminal {
		hasReason = false
	}
	waitingState := func(r waiting) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: r.reason, Message: r.message}}
	}
	prev := v.previous[spec.Name]
	if prev == nil || prev.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		// The PLEG's status of a pod may hold only its current sandbox's
		// containers (an evented update); the worker remembers the rest.
		if le := in.lastExited[spec.Name]; le != nil && latest != nil && le.GetId() != latest.GetId() {
			prev = le
		}
	}
	if prev != nil && prev.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		out.LastTerminationState = corev1.ContainerState{Terminated: terminatedState(prev, in.runtimeName)}
	}
	switch {
	case latest == nil:
		if hasReason {
			out.State = waitingState(reason)
		} else {
			out.State = waitingState(waiting{reason: defaultWaiting})
		}
	default:
		out.ImageID = latest.GetImageRef()
		out.ContainerID = in.runtimeName + "://" + latest.GetId()
		out.RestartCount = int32(latest.GetMetadata().GetAttempt())
		switch latest.GetState() {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			out.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: nsTime(latest.GetStartedAt())}}
			started = true
			out.Ready = !in.terminal
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			term := terminatedState(latest, in.runtimeName)
			if hasReason {
				out.State = waitingState(reason)
				out.LastTerminationState = corev1.ContainerState{Terminated: term}
			} else {
				out.State = corev1.ContainerState{Terminated: term}
			}
		default: // created, not started yet (or unknown)
			if hasReason {
				out.State = waitingState(reason)
			} else {
				out.State = waitingState(waiting{reason: ReasonContainerCreating})
			}
		}
	}
	if in.terminal && out.State.Terminated == nil {
		// The kubelet's answer for a container whose end it did not see.
		out.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137,
			Reason:   ReasonContainerStatusUnknown,
			Message:  "The container could not be located when the pod was terminated",
		}}
		out.Ready = false
	}
	return out
}

// buildStatus computes the pod status a kubectl user expects from the
// runtime's view and the worker's own knowledge (why containers wait).
func buildStatus(in *statusInput) corev1.PodStatus {
	pod := in.pod
	v := newRuntimeView(in.runtime, in.sandboxID)
	defaultWaiting := ReasonContainerCreating
	if len(pod.Spec.InitContainers) > 0 {
		defaultWaiting = ReasonPodInitializing
	}
	st := corev1.PodStatus{QOSClass: pod.Status.QOSClass, HostIP: in.nodeIP}
	if in.nodeIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: in.nodeIP}}
	}
	if !in.startTime.IsZero() {
		t := metav1.NewTime(in.startTime)
		st.StartTime = &t
	}
	podIP := ""
	if pod.Spec.HostNetwork {
		podIP = in.nodeIP
	} else if v.sandbox != nil {
		podIP = v.sandbox.GetNetwork().GetIp()
	}
	if podIP != "" {
		st.PodIP = podIP
		st.PodIPs = []corev1.PodIP{{IP: podIP}}
	}

	// Init containers.
	var pendingInit, failedInit []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := containerStatus(in, v, c, defaultWaiting)
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		switch {
		case isSidecar(c):
			if cs.State.Running == nil && (cs.LastTerminationState.Terminated == nil || cs.RestartCount == 0) && !in.terminal {
				pendingInit = append(pendingInit, c.Name)
			}
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
		case cs.State.Terminated != nil:
			failedInit = append(failedInit, c.Name)
		case cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode != 0 && cs.State.Running == nil:
			failedInit = append(failedInit, c.Name)
		default:
			pendingInit = append(pendingInit, c.Name)
		}
	}
	// Regular containers.
	var running, waitingN, stopped, succeeded int
	var unready []string
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := containerStatus(in, v, c, defaultWaiting)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		if !cs.Ready {
			unready = append(unready, c.Name)
		}
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.LastTerminationState.Terminated != nil:
			stopped++ // restarting
		default:
			waitingN++
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isSidecar(c) && !st.InitContainerStatuses[i].Ready {
			unready = append(unready, c.Name)
		}
	}

	// Phase, as the kubelet's getPhase.
	never := pod.Spec.RestartPolicy == corev1.RestartPolicyNever
	switch {
	case len(failedInit) > 0 && never:
		st.Phase = corev1.PodFailed
	case in.terminal && len(pendingInit)+len(failedInit) > 0:
		st.Phase = corev1.PodFailed
	case len(pendingInit)+len(failedInit) > 0:
		st.Phase = corev1.PodPending
	case in.terminal:
		st.Phase = corev1.PodFailed
		if stopped == len(pod.Spec.Containers) && succeeded == stopped {
			st.Phase = corev1.PodSucceeded
		}
	case waitingN > 0:
		st.Phase = corev1.PodPending
	case running > 0:
		st.Phase = corev1.PodRunning
	case stopped > 0:
		switch {
		case pod.Spec.RestartPolicy == corev1.RestartPolicyAlways:
			st.Phase = corev1.PodRunning
		case stopped == succeeded:
			st.Phase = corev1.PodSucceeded
		case never:
			st.Phase = corev1.PodFailed
		default:
			st.Phase = corev1.PodRunning
		}
	default:
		st.Phase = corev1.PodPending
	}
	if in.podReason != nil && !in.terminal {
		st.Reason, st.Message = in.podReason.reason, in.podReason.message
	}

	// Conditions.
	completed := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
		if ok {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, "", ""
		}
		c.LastTransitionTime = transitionTime(in.prev, t, c.Status, in.now)
		return c
	}
	sandboxReady := v.sandbox != nil && v.sandbox.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY && !in.terminal
	if v.sandbox == nil && in.sandboxID != "" && !in.terminal {
		sandboxReady = true // just created; the PLEG has not inspected it yet
	}
	var notInit []string
	notInit = append(append(notInit, pendingInit...), failedInit...)
	initialized := len(notInit) == 0
	initReason, initMsg := "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(notInit, " "))
	if in.terminal && initialized {
		initReason = "PodCompleted"
	}
	readyReason, readyMsg := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	if completed {
		readyReason, readyMsg = "PodCompleted", ""
	}
	allReady := len(unready) == 0 && !completed && initialized
	if !initialized && !completed && len(unready) == 0 {
		readyReason, readyMsg = "ContainersNotInitialized", initMsg
	}
	var sched *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			c := pod.Status.Conditions[i]
			sched = &c
		}
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, sandboxReady, "", ""),
		cond(corev1.PodInitialized, initialized, initReason, initMsg),
		cond(corev1.ContainersReady, allReady, readyReason, readyMsg),
		cond(corev1.PodReady, allReady, readyReason, readyMsg),
	}
	if initialized {
		st.Conditions[1].Reason, st.Conditions[1].Message = "", ""
	}
	if sched != nil {
		st.Conditions = append(st.Conditions, *sched)
	}
	return st
}

// transitionTime keeps a condition's transition time while its status
// stays the same, so that republishing an unchanged pod changes nothing.
func transitionTime(prev *corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus, now time.Time) metav1.Time {
	if prev != nil {
		for _, c := range prev.Conditions {
			if c.Type == t && c.Status == s {
				return c.LastTransitionTime
			}
		}
	}
	return metav1.NewTime(now.Truncate(time.Second))
}
