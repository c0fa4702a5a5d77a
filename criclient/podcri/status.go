package podcri

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Container and pod reasons, as the kubelet shows them in a pod's status.
// The image pull reasons are asyncpull's (ErrImagePull, ImagePullBackOff).
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
	// ReasonCreateContainerConfigError: the container's config could not
	// be made (an env variable, a volume).
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	// ReasonCreateContainerError: CreateContainer failed.
	ReasonCreateContainerError = "CreateContainerError"
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

// Waiting is why a container, or the pod, is not running, as the caller
// last saw it: a Reason above or asyncpull's, and a message.
type Waiting struct {
	Reason  string
	Message string
}

// StatusInput is what PodStatus computes a pod's status from: the
// runtime's statuses plus what only the pod's worker knows (why a container
// waits, what its probes say).
type StatusInput struct {
	// Pod is the desired pod: its spec, and the status it came with
	// (QOSClass and a PodScheduled condition are kept).
	Pod *corev1.Pod
	// Sandbox is the status of the pod's current sandbox, nil if there is
	// none or it has not been inspected yet.
	Sandbox *runtimeapi.PodSandboxStatus
	// SandboxID is the current sandbox's id, "" if none. A SandboxID
	// without a Sandbox is a sandbox just created: it counts as ready.
	SandboxID string
	// Containers are the container instances of the current sandbox, in
	// any order; the newest instance of a name (highest attempt) is its
	// current one.
	Containers []*runtimeapi.ContainerStatus
	// LastExited optionally holds, per container name, the newest exited
	// instance the caller saw: the container's lastState once the runtime
	// no longer shows it (an exited instance is removed on restart).
	LastExited map[string]*runtimeapi.ContainerStatus
	// Waiting says why a container that is not running waits (by name).
	Waiting map[string]Waiting
	// PodWaiting is a pod-level failure (FailedCreatePodSandBox), or nil.
	PodWaiting *Waiting
	// Probe gives a running instance's probe verdicts: started (its
	// startup probe passed) and ready. Nil: a running container is started
	// and ready.
	Probe func(*runtimeapi.ContainerStatus) (started, ready bool)
	// RuntimeName is the scheme of container IDs ("containerd").
	RuntimeName string
	// HostIP is the node's IP. PodIP, when set, overrides the sandbox's
	// (a pod on the node's network has the node's).
	HostIP, PodIP string
	// StartTime is when the node accepted the pod.
	StartTime time.Time
	// Terminal says the pod will run nothing more: deleted and stopped.
	Terminal bool
	// Previous is the status last reported, so that a condition whose
	// status stays keeps its transition time.
	Previous *corev1.PodStatus
	// Now is the transition time of a condition that changes.
	Now time.Time
}

// PodStatus computes the corev1.PodStatus a kubectl user expects of a
// kubelet from in: the phase by the kubelet's rules (init containers, the
// restart policy, a deleted pod's Succeeded or Failed); container states
// with the waiting reasons ContainerCreating or PodInitializing by default
// and in.Waiting's otherwise, terminated states with the runtime's reason
// or Completed/Error, lastState, restart counts, image and container IDs
// (runtime://id), started and ready; the conditions
// PodReadyToStartContainers, Initialized, ContainersReady and Ready with
// the kubelet's reasons and messages and stable transition times; host and
// pod IPs and the start time. A terminal pod's containers whose end was not
// seen are ContainerStatusUnknown with exit code 137, as the kubelet shows
// them. A nil in.Pod is an *ArgError.
func PodStatus(in StatusInput) (corev1.PodStatus, error) {
	pod := in.Pod
	if pod == nil {
		return corev1.PodStatus{}, &ArgError{Method: "PodStatus", Arg: "pod", Reason: "is nil"}
	}
	v := newInstances(in)
	defaultWaiting := ReasonContainerCreating
	if len(pod.Spec.InitContainers) > 0 {
		defaultWaiting = ReasonPodInitializing
	}
	st := corev1.PodStatus{QOSClass: pod.Status.QOSClass, HostIP: in.HostIP}
	if st.QOSClass == "" {
		st.QOSClass = QOSClass(pod)
	}
	if in.HostIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: in.HostIP}}
	}
	if !in.StartTime.IsZero() {
		t := metav1.NewTime(in.StartTime)
		st.StartTime = &t
	}
	podIP := in.PodIP
	if podIP == "" && in.Sandbox != nil {
		podIP = in.Sandbox.GetNetwork().GetIp()
	}
	if podIP != "" {
		st.PodIP = podIP
		st.PodIPs = []corev1.PodIP{{IP: podIP}}
	}

	var pendingInit, failedInit []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := v.status(c, defaultWaiting)
		if !IsSidecar(c) {
			// A regular init container is ready once it has succeeded;
			// nothing of a terminated pod is.
			cs.Ready = !in.Terminal && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		switch {
		case IsSidecar(c):
			if cs.State.Running == nil && (cs.LastTerminationState.Terminated == nil || cs.RestartCount == 0) && !in.Terminal {
				pendingInit = append(pendingInit, c.Name)
			} else if cs.State.Running != nil && (cs.Started == nil || !*cs.Started) && !in.Terminal {
				pendingInit = append(pendingInit, c.Name) // its startup probe gates what follows
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
	var running, waitingN, stopped, succeeded int
	var unready []string
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := v.status(c, defaultWaiting)
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
		if c := &pod.Spec.InitContainers[i]; IsSidecar(c) && !st.InitContainerStatuses[i].Ready {
			unready = append(unready, c.Name)
		}
	}

	// The phase, by the kubelet's rules.
	never := pod.Spec.RestartPolicy == corev1.RestartPolicyNever
	switch {
	case len(failedInit) > 0 && never:
		st.Phase = corev1.PodFailed
	case in.Terminal && len(pendingInit)+len(failedInit) > 0:
		st.Phase = corev1.PodFailed
	case len(pendingInit)+len(failedInit) > 0:
		st.Phase = corev1.PodPending
	case in.Terminal:
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
	if in.PodWaiting != nil && !in.Terminal {
		st.Reason, st.Message = in.PodWaiting.Reason, in.PodWaiting.Message
	}

	// The conditions.
	completed := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
		if ok {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, "", ""
		}
		c.LastTransitionTime = transitionTime(in.Previous, t, c.Status, in.Now)
		return c
	}
	sandboxReady := !in.Terminal && ((in.Sandbox != nil && in.Sandbox.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY) ||
		(in.Sandbox == nil && in.SandboxID != ""))
	notInit := append(append([]string(nil), pendingInit...), failedInit...)
	initialized := len(notInit) == 0
	initReason, initMsg := "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(notInit, " "))
	if in.Terminal && initialized {
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
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, sandboxReady, "", ""),
		cond(corev1.PodInitialized, initialized, initReason, initMsg),
		cond(corev1.ContainersReady, allReady, readyReason, readyMsg),
		cond(corev1.PodReady, allReady, readyReason, readyMsg),
	}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			st.Conditions = append(st.Conditions, pod.Status.Conditions[i])
			break
		}
	}
	return st, nil
}

// IsSidecar reports whether c is a sidecar: an init container with
// restartPolicy Always, which keeps running beside the regular containers.
func IsSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// instances indexes a pod's container instances by name.
type instances struct {
	in       *StatusInput
	latest   map[string]*runtimeapi.ContainerStatus
	previous map[string]*runtimeapi.ContainerStatus
}

func newInstances(in StatusInput) instances {
	v := instances{in: &in, latest: map[string]*runtimeapi.ContainerStatus{}, previous: map[string]*runtimeapi.ContainerStatus{}}
	cs := append([]*runtimeapi.ContainerStatus(nil), in.Containers...)
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i].GetMetadata().GetAttempt(), cs[j].GetMetadata().GetAttempt()
		if a != b {
			return a > b
		}
		return cs[i].GetCreatedAt() > cs[j].GetCreatedAt()
	})
	for _, c := range cs {
		name := c.GetMetadata().GetName()
		switch {
		case name == "":
		case v.latest[name] == nil:
			v.latest[name] = c
		case v.previous[name] == nil:
			v.previous[name] = c
		}
	}
	return v
}

func nsTime(ns int64) metav1.Time {
	if ns == 0 {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(0, ns))
}

func (v instances) containerID(id string) string {
	name := v.in.RuntimeName
	if name == "" {
		name = "cri"
	}
	return name + "://" + id
}

func (v instances) terminated(cs *runtimeapi.ContainerStatus) *corev1.ContainerStateTerminated {
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
		ContainerID: v.containerID(cs.GetId()),
	}
}

// status converts one container's instances.
func (v instances) status(spec *corev1.Container, defaultWaiting string) corev1.ContainerStatus {
	in := v.in
	started := false
	out := corev1.ContainerStatus{Name: spec.Name, Image: spec.Image, Started: &started}
	latest := v.latest[spec.Name]
	reason, hasReason := in.Waiting[spec.Name]
	if in.Terminal {
		hasReason = false
	}
	waiting := func(w Waiting) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
	}
	prev := v.previous[spec.Name]
	if prev == nil || prev.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		if le := in.LastExited[spec.Name]; le != nil && (latest == nil || le.GetId() != latest.GetId()) {
			prev = le
		}
	}
	if prev != nil && prev.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		out.LastTerminationState = corev1.ContainerState{Terminated: v.terminated(prev)}
		out.RestartCount = int32(prev.GetMetadata().GetAttempt()) + 1
	}
	switch {
	case latest == nil:
		if hasReason {
			out.State = waiting(reason)
		} else {
			out.State = waiting(Waiting{Reason: defaultWaiting})
		}
	default:
		out.ImageID = latest.GetImageRef()
		out.ContainerID = v.containerID(latest.GetId())
		out.RestartCount = int32(latest.GetMetadata().GetAttempt())
		switch latest.GetState() {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			out.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: nsTime(latest.GetStartedAt())}}
			ready := true
			started = true
			if in.Probe != nil {
				started, ready = in.Probe(latest)
			}
			out.Ready = !in.Terminal && started && ready
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			term := v.terminated(latest)
			if hasReason {
				out.State = waiting(reason)
				out.LastTerminationState = corev1.ContainerState{Terminated: term}
			} else {
				out.State = corev1.ContainerState{Terminated: term}
			}
		default: // created, not started yet (or unknown)
			if hasReason {
				out.State = waiting(reason)
			} else {
				out.State = waiting(Waiting{Reason: ReasonContainerCreating})
			}
		}
	}
	if in.Terminal && out.State.Terminated == nil {
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

// transitionTime keeps a condition's transition time while its status
// stays the same, so that an unchanged pod reports an unchanged status.
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
