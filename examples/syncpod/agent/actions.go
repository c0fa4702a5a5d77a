package agent

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncpod/syncpod/criclient/podcri"
)

// containerKill is a running container that must go.
type containerKill struct {
	status *containerInstance
	reason string
	// keep: stop it but keep the exited instance, so that it is restarted
	// through the crash-loop back-off (a liveness, startup or postStart
	// failure), rather than removed and replaced at once.
	keep  bool
	grace *int64 // the failing probe's terminationGracePeriodSeconds; nil: the pod's
}

// probeView is what computePodActions reads of the probes (the prober).
type probeView interface {
	// state is the startup and readiness verdicts of a running instance.
	state(uid types.UID, name, id string) (started, ready bool)
	// killReason says why the agent kills (or killed) the instance, with
	// the grace period to use and whether the kill was already done.
	killReason(uid types.UID, id string) (reason string, grace *int64, done bool)
}

// noProbes is the probeView of an agent without probes: every container
// started and ready, none killed.
type noProbes struct{}

func (noProbes) state(types.UID, string, string) (bool, bool) { return true, true }
func (noProbes) killReason(types.UID, string) (string, *int64, bool) {
	return "", nil, false
}

// containerStart is a container to create and start, with its attempt.
type containerStart struct {
	spec    *corev1.Container
	attempt uint32
	init    bool     // an init container (regular or sidecar)
	sidecar bool     // a restartable init container
	remove  []string // older exited instances to remove first
	// restartOf is set for a restart after a crash: the back-off key and
	// the finish time the back-off is counted from, recorded once the
	// container actually started.
	restartKey string
	finishedAt time.Time
}

// podActions is what one sync must do, computed from the desired pod and
// the runtime's status, like the kubelet's computePodActions.
type podActions struct {
	createSandbox  bool
	killPod        bool // remove the pod's current sandbox and containers first
	sandboxAttempt uint32
	podFailed      bool // a regular init container failed under restartPolicy Never: stop the sandbox

	kill []containerKill
	// initSteps are init containers to start in order. With chain, every
	// sidecar up to and including the next regular init container is
	// listed (a started sidecar gates what follows); without it, one step
	// per sync, as the kubelet does.
	initSteps []containerStart
	initDone  bool
	start     []containerStart // regular containers

	backoffWait time.Duration // shortest crash-loop wait left, 0 if none
	// backoffPeriod is each inBackoff container's crash-loop back-off, the
	// period its status message names (as the kubelet's), not the wait left.
	backoffPeriod map[string]time.Duration
	inBackoff     []string // containers waiting in crash-loop backoff
	allRunning    bool     // every regular container is running
	finished      bool     // nothing runs and nothing will (Never/OnFailure done)
	succeeded     bool     // finished and every regular container exited 0
}

// containerHash identifies a container spec; a change restarts it.
func containerHash(c *corev1.Container) string { return podcri.ContainerHash(c) }

func backoffKey(pod *corev1.Pod, name string) string { return string(pod.UID) + "/" + name }

// computePodActions decides the next steps for pod given status, and the
// probes' verdicts (pv; nil: no probes): a container whose liveness or
// startup probe failed is killed and kept exited, to be restarted through
// the crash-loop back-off, and a running sidecar whose startup probe has
// not passed gates what follows it until the pod first initialised.
func computePodActions(pod *corev1.Pod, status *runtimePodStatus, bo *crashBackoff, chain bool, pv probeView) *podActions {
	if pv == nil {
		pv = noProbes{}
	}
	a := &podActions{}
	hadContainers := len(status.Containers) > 0
	if status.SandboxID == "" || !status.SandboxReady {
		if status.SandboxID != "" && pod.Spec.RestartPolicy == corev1.RestartPolicyNever && hadContainers {
			// The pod ran and its sandbox died: Never means it stays down.
			a.finished = true
			return a
		}
		if status.SandboxID != "" && pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && completed(pod, status) {
			// Done, and its sandbox stopped with it: nothing to run again.
			a.finished, a.succeeded = true, true
			return a
		}
		a.createSandbox = true
		a.killPod = status.SandboxID != ""
		if a.killPod {
			a.sandboxAttempt = status.SandboxAttempt + 1
		}
		// The restart count goes on in a new sandbox, as the kubelet's.
		attempt := func(name string) uint32 {
			if l := status.Latest(name); l != nil && a.killPod {
				return l.Attempt + 1
			}
			return 0
		}
		if len(pod.Spec.InitContainers) == 0 {
			for i := range pod.Spec.Containers {
				c := &pod.Spec.Containers[i]
				a.start = append(a.start, containerStart{spec: c, attempt: attempt(c.Name)})
			}
			return a
		}
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			a.initSteps = append(a.initSteps, containerStart{spec: c, attempt: attempt(c.Name), init: true, sidecar: podcri.IsSidecar(c)})
			if !chain || !podcri.IsSidecar(c) {
				break
			}
		}
		return a
	}

	// Containers that must go: not in the spec, or the spec changed.
	specs := map[string]*corev1.Container{}
	for i := range pod.Spec.InitContainers {
		specs[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
	}
	for i := range pod.Spec.Containers {
		specs[pod.Spec.Containers[i].Name] = &pod.Spec.Containers[i]
	}
	replaced := map[string]bool{}
	for _, cs := range status.Containers {
		if cs.State == stateExited {
			continue
		}
		if l := status.Latest(cs.Name); l != nil && l.Assumed && cs.Attempt <= l.Attempt {
			continue // just started by us; the status has not caught up
		}
		spec, ok := specs[cs.Name]
		switch {
		case !ok:
			a.kill = append(a.kill, containerKill{status: cs, reason: "not in the pod spec"})
		case cs.Hash != "" && cs.Hash != containerHash(spec):
			a.kill = append(a.kill, containerKill{status: cs, reason: "spec changed"})
			replaced[cs.Name] = true
		case cs.State == stateUnknown:
			// Created but not started at the start of a sync: a start that
			// failed or was cancelled. Replace it.
			a.kill = append(a.kill, containerKill{status: cs, reason: "created but never started"})
			replaced[cs.Name] = true
		default:
			if reason, grace, done := pv.killReason(pod.UID, cs.ID); reason != "" && !done {
				a.kill = append(a.kill, containerKill{status: cs, reason: reason, keep: true, grace: grace})
			}
		}
	}
	// failed: an exit that counts as a failure for the restart policy,
	// which a kill by the agent (a probe or hook failure) always is.
	failed := func(cs *containerInstance) bool {
		reason, _, _ := pv.killReason(pod.UID, cs.ID)
		return cs.ExitCode != 0 || reason != ""
	}
	// initialized: a regular container has run, so the pod initialised
	// once and a restarted sidecar no longer gates what follows it.
	initialized := false
	for i := range pod.Spec.Containers {
		if status.Latest(pod.Spec.Containers[i].Name) != nil {
			initialized = true
		}
	}
	next := func(name string) (latest *containerInstance, attempt uint32, remove []string) {
		latest = status.Latest(name)
		for _, cs := range status.Containers {
			if cs.Name == name && cs.State == stateExited && cs != latest {
				remove = append(remove, cs.ID)
			}
		}
		if latest != nil {
			attempt = latest.Attempt + 1
			if latest.State == stateExited {
				remove = append(remove, latest.ID)
			}
		}
		if replaced[name] {
			latest = nil
		}
		return latest, attempt, remove
	}
	wait := func(name string, d, period time.Duration) {
		a.inBackoff = append(a.inBackoff, name)
		if a.backoffPeriod == nil {
			a.backoffPeriod = map[string]time.Duration{}
		}
		a.backoffPeriod[name] = period
		if a.backoffWait == 0 || d < a.backoffWait {
			a.backoffWait = d
		}
	}
	// restartable applies crash-loop backoff to an exited instance; the
	// back-off advances only when the restart really happens (startContainer).
	restartable := func(name string, latest *containerInstance) bool {
		if in, left, period := bo.inBackoff(backoffKey(pod, name), latest.FinishedAt); in {
			wait(name, left, period)
			return false
		}
		return true
	}
	withRestart := func(step containerStart, latest *containerInstance) containerStart {
		step.restartKey, step.finishedAt = backoffKey(pod, step.spec.Name), latest.FinishedAt
		return step
	}

	// Init containers, in order.
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		latest, attempt, remove := next(c.Name)
		step := containerStart{spec: c, attempt: attempt, init: true, sidecar: podcri.IsSidecar(c), remove: remove}
		if podcri.IsSidecar(c) {
			switch {
			case latest != nil && latest.State == stateRunning:
				if started, _ := pv.state(pod.UID, c.Name, latest.ID); !started && !initialized {
					return a // its startup probe gates what follows
				}
				continue
			case latest == nil:
				a.initSteps = append(a.initSteps, step)
				if !chain {
					return a
				}
				continue
			default: // exited: sidecars always restart
				if restartable(c.Name, latest) {
					a.initSteps = append(a.initSteps, withRestart(step, latest))
				}
				if latest.Attempt == 0 && !chain {
					return a
				}
				continue // it started once: what follows is not gated again
			}
		}
		switch {
		case latest == nil:
			a.initSteps = append(a.initSteps, step)
			return a
		case latest.State != stateExited:
			return a // running: wait for it to exit
		case latest.ExitCode == 0:
			continue
		case pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
			a.podFailed = true
			a.finished = true
			return a
		default:
			if restartable(c.Name, latest) {
				a.initSteps = append(a.initSteps, withRestart(step, latest))
			}
			return a
		}
	}
	a.initDone = true

	running, done, succeeded := 0, 0, 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		latest, attempt, remove := next(c.Name)
		step := containerStart{spec: c, attempt: attempt, remove: remove}
		switch {
		case latest == nil:
			a.start = append(a.start, step)
		case latest.State == stateRunning:
			if !latest.Assumed {
				running++
			}
		case latest.State == stateExited:
			restart := pod.Spec.RestartPolicy == corev1.RestartPolicyAlways ||
				(pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && failed(latest))
			if !restart {
				done++
				if !failed(latest) {
					succeeded++
				}
				continue
			}
			if restartable(c.Name, latest) {
				a.start = append(a.start, withRestart(step, latest))
			}
		}
	}
	n := len(pod.Spec.Containers)
	a.allRunning = running == n
	if done == n {
		a.finished = true
		a.succeeded = succeeded == n
	}
	return a
}

// completed reports whether every regular container of pod has exited 0.
func completed(pod *corev1.Pod, status *runtimePodStatus) bool {
	for i := range pod.Spec.Containers {
		l := status.Latest(pod.Spec.Containers[i].Name)
		if l == nil || l.State != stateExited || l.ExitCode != 0 {
			return false
		}
	}
	return true
}
