package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/syncpod/syncpod/concurrentstart/admission"
	"github.com/syncpod/syncpod/criclient/podcri"
)

// runSandbox removes the pod's dead sandbox (when there is one) and
// creates a new one; it returns its id.
func (a *Agent) runSandbox(ctx context.Context, pod *corev1.Pod, st *runtimePodStatus, acts *podActions) (string, error) {
	if acts.killPod {
		// The dead sandbox's containers go with it: keep their ends for
		// the containers' lastState.
		a.pods.update(pod.UID, func(rec *podRecord) {
			for _, c := range st.Containers {
				if c.Runtime != nil {
					rec.rememberExit(c.Runtime)
				}
			}
		})
		for _, id := range append([]string{st.SandboxID}, st.OldSandboxes...) {
			if id == "" {
				continue
			}
			if err := a.removeSandbox(ctx, id); err != nil {
				return "", err
			}
		}
	}
	var id string
	err := a.admitted(ctx, pod, "RunPodSandbox", func() (err error) {
		id, err = a.runtime.runPodSandbox(ctx, a.podSandboxConfig(pod, acts.sandboxAttempt), ptr.Deref(pod.Spec.RuntimeClassName, ""))
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			a.pods.setPodWaiting(pod.UID, &podcri.Waiting{Reason: podcri.ReasonFailedCreatePodSandBox, Message: err.Error()})
		}
		return "", fmt.Errorf("RunPodSandbox: %w", err)
	}
	a.pods.update(pod.UID, func(rec *podRecord) { rec.ownSandbox, rec.podWaiting = id, nil })
	a.emit(Event{Type: eventSandbox, Pod: podKey(pod), Attempt: acts.sandboxAttempt})
	return id, nil
}

// startContainer removes the container's old exited instances, then
// creates and starts the new one and runs its postStart hook (a failed
// hook kills it; the error then wraps errPostStartHook).
func (a *Agent) startContainer(ctx context.Context, pod *corev1.Pod, sandboxID string, sbAttempt uint32, step containerStart) error {
	for _, id := range step.remove {
		if err := a.runtime.removeContainer(ctx, id); err != nil {
			a.log.Debug("remove old container", zap.String("id", id), zap.Error(err))
		}
		a.inspector.forget(id)
	}
	name := step.spec.Name
	failed := func(reason string, err error) {
		if ctx.Err() == nil {
			a.pods.setWaiting(pod.UID, name, podcri.Waiting{Reason: reason, Message: err.Error()}, a.clock.Now())
		}
	}
	cfg, err := a.podContainerConfig(pod, step)
	if err != nil {
		failed(podcri.ReasonCreateContainerConfigError, err)
		return fmt.Errorf("CreateContainer %s: %w", name, err)
	}
	var id string
	err = a.admitted(ctx, pod, "CreateContainer", func() (err error) {
		id, err = a.runtime.createContainer(ctx, sandboxID, cfg, a.podSandboxConfig(pod, sbAttempt))
		return err
	})
	if err != nil {
		failed(podcri.ReasonCreateContainerError, err)
		return fmt.Errorf("CreateContainer %s: %w", name, err)
	}
	if err := a.admitted(ctx, pod, "StartContainer", func() error { return a.runtime.startContainer(ctx, id) }); err != nil {
		failed(podcri.ReasonRunContainerError, err)
		return fmt.Errorf("StartContainer %s: %w", name, err)
	}
	a.pods.clearWaiting(pod.UID, name)
	if step.restartKey != "" {
		a.backoff.next(step.restartKey, step.finishedAt)
	}
	a.metrics.containerRuns.Inc()
	if err := a.postStart(ctx, pod, step.spec, id, step.attempt); err != nil {
		return fmt.Errorf("StartContainer %s: %w", step.spec.Name, err)
	}
	a.emit(Event{Type: eventStarted, Pod: podKey(pod), Container: step.spec.Name, Attempt: step.attempt})
	return nil
}

// killContainer stops a running container of a pod the agent keeps, as
// the kubelet's killContainer does: its preStop hook first, bounded by the
// grace period (the pod's, or the failing probe's), then StopContainer
// with what is left of it (at least minStopGraceSeconds). A container
// replaced now (spec change, not in the spec) is removed; one kept
// (k.keep: a liveness, startup or postStart failure) stays exited, so the
// next sync restarts it through the crash-loop back-off.
func (a *Agent) killContainer(ctx context.Context, pod *corev1.Pod, k containerKill) error {
	grace := time.Duration(gracePeriod(pod)) * time.Second
	if k.grace != nil {
		grace = time.Duration(*k.grace) * time.Second
	}
	if k.keep {
		a.prober.markKilled(pod, k.status, k.reason)
	}
	a.emit(Event{Type: eventKilling, Pod: podKey(pod), Container: k.status.Name, Attempt: k.status.Attempt, Err: errors.New(k.reason)})
	used := a.preStop(ctx, pod, containerSpec(pod, k.status.Name), k.status.ID, grace)
	if err := a.runtime.stopContainer(ctx, k.status.ID, stopTimeout(grace, used)); err != nil {
		return fmt.Errorf("StopContainer %s (%s): %w", k.status.Name, k.reason, err)
	}
	if k.keep {
		a.prober.killed(pod.UID, k.status.ID)
		return nil
	}
	if err := a.runtime.removeContainer(ctx, k.status.ID); err != nil {
		return fmt.Errorf("RemoveContainer %s (%s): %w", k.status.Name, k.reason, err)
	}
	a.inspector.forget(k.status.ID)
	return nil
}

// observe updates the pod's report from a sync's view and emits the
// pod-level events.
func (a *Agent) observe(pod *corev1.Pod, st *runtimePodStatus, acts *podActions) {
	if d, first := a.pods.observe(pod.UID, a.clock.Now(), st, acts); first {
		a.metrics.startup.Observe(d.Seconds())
		a.forgetAdmission(pod) // up: its place in the start line is done
		a.emit(Event{Type: eventRunning, Pod: podKey(pod), Duration: d})
	}
	for _, name := range acts.inBackoff {
		a.pods.setWaiting(pod.UID, name, podcri.Waiting{Reason: podcri.ReasonCrashLoopBackOff,
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
				acts.backoffPeriod[name].Round(time.Second), name, pod.Name, pod.Namespace, pod.UID)}, a.clock.Now())
		a.emit(Event{Type: eventBackOff, Pod: podKey(pod), Container: name, Duration: acts.backoffWait})
	}
	if acts.finished {
		a.emit(Event{Type: eventFinished, Pod: podKey(pod)})
	}
}

// beginSync computes the pod's actions from st and does what every sync does
// first, in both modes: record what it saw, and stop the sandbox of a pod
// that has failed for good. chain is computePodActions' chain argument. When
// done is true the sync ends with res; otherwise sbAttempt is the sandbox
// attempt the sync works on.
func (a *Agent) beginSync(ctx context.Context, pod *corev1.Pod, st *runtimePodStatus, chain bool) (acts *podActions, sbAttempt uint32, res syncResult, done bool) {
	a.prober.sync(pod, st)
	acts = computePodActions(pod, st, a.backoff, chain, a.prober)
	if acts.killPod {
		a.continueAttempts(pod.UID, acts)
	}
	if !acts.killPod {
		// A pod keeping its sandbox drops any other ready one (a stale
		// duplicate); a pod starting over removes them all anyway.
		for _, id := range st.StaleReady {
			if err := a.removeSandbox(ctx, id); err != nil {
				return acts, 0, syncResult{err: fmt.Errorf("remove duplicate sandbox: %w", err)}, true
			}
		}
	}
	a.observe(pod, st, acts)
	if acts.finished && st.SandboxReady {
		// A pod that is done keeps nothing running, as the kubelet ends a
		// pod in a terminal phase: its sidecars and sandbox stop.
		if err := a.stopContainersGracefully(ctx, pod, a.capGrace(killGracePeriod(pod)), st.SandboxID); err != nil {
			return acts, 0, syncResult{err: fmt.Errorf("stop finished pod: %w", err)}, true
		}
		if err := a.runtime.stopPodSandbox(ctx, st.SandboxID); err != nil {
			return acts, 0, syncResult{err: fmt.Errorf("StopPodSandbox: %w", err)}, true
		}
	}
	if acts.finished {
		return acts, 0, syncResult{}, true
	}
	return acts, sandboxAttempt(st, acts), syncResult{}, false
}

func sandboxAttempt(st *runtimePodStatus, acts *podActions) uint32 {
	if acts.createSandbox {
		return acts.sandboxAttempt
	}
	return st.SandboxAttempt
}

// admitted runs one runtime call of pod under a start-admission grant
// (syncpod mode only sets one); the call's error teaches the admission's
// limiter.
func (a *Agent) admitted(ctx context.Context, pod *corev1.Pod, kind string, call func() error) error {
	if a.admission == nil {
		return call()
	}
	// A pod starting for the first time keeps its place from when the
	// agent accepted it: its worker may reach the admission after the
	// workers of pods accepted later. A restart queues from now.
	var arrived time.Time
	a.pods.with(pod.UID, func(rec *podRecord) {
		if rec.startup == 0 {
			arrived = rec.created
		}
	})
	g, err := a.admission.Acquire(ctx, admission.Request{Pod: string(pod.UID), Priority: int(ptr.Deref(pod.Spec.Priority, 0)), Kind: kind, Arrived: arrived})
	if err != nil {
		return fmt.Errorf("start admission: %w", err)
	}
	err = call()
	g.Release(err)
	return err
}

func (a *Agent) forgetAdmission(pod *corev1.Pod) {
	if a.admission != nil {
		a.admission.Forget(string(pod.UID))
	}
}

// continueAttempts makes the containers of a pod starting over in a new
// sandbox go on from the highest attempt the agent has seen of each, as
// the kubelet's restart counts do, also when the status this sync read no
// longer shows the dead sandbox's containers.
func (a *Agent) continueAttempts(uid types.UID, acts *podActions) {
	a.pods.with(uid, func(rec *podRecord) {
		for _, steps := range [][]containerStart{acts.start, acts.initSteps} {
			for i := range steps {
				if n, ok := rec.seenAttempt[steps[i].spec.Name]; ok && n+1 > steps[i].attempt {
					steps[i].attempt = n + 1
				}
			}
		}
	})
}
