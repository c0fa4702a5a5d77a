package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// reasonFailedPostStartHook is the kill reason of a container whose
// postStart hook failed (the kubelet's).
const reasonFailedPostStartHook = "FailedPostStartHook"

// errPostStartHook marks a start whose container started but whose
// postStart hook failed: the container was killed, to be restarted
// through the crash-loop back-off.
var errPostStartHook = errors.New("postStart hook failed")

// containerSpec finds the named container of pod (regular or init), nil
// if pod is nil or has none.
func containerSpec(pod *corev1.Pod, name string) *corev1.Container {
	if pod == nil {
		return nil
	}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// postStart runs c's postStart hook, if it has one, right after the
// container started, as the kubelet does: synchronously, before the
// container counts as started, with no time limit of its own (only ctx:
// the pod's deletion or the agent's stop ends it). On failure the
// container is killed (its preStop hook runs) and kept exited, so the
// next sync restarts it through the crash-loop back-off; the error wraps
// errPostStartHook.
func (a *Agent) postStart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, attempt uint32) error {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return nil
	}
	err := a.runHook(ctx, handlerTarget{pod: pod, container: c, id: id}, c.Lifecycle.PostStart)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", errPostStartHook, ctx.Err())
	}
	herr := &hookError{Hook: "PostStart", Container: c.Name, Err: err}
	a.emit(Event{Type: eventFailedPostStartHook, Pod: podKey(pod), Container: c.Name, Attempt: attempt, Err: herr})
	k := containerKill{status: &containerInstance{ID: id, Name: c.Name, Attempt: attempt, State: stateRunning},
		reason: reasonFailedPostStartHook, keep: true}
	if kerr := a.killContainer(ctx, pod, k); kerr != nil {
		return fmt.Errorf("%w: %w; %w", errPostStartHook, herr, kerr)
	}
	return fmt.Errorf("%w: %w", errPostStartHook, herr)
}

// preStop runs c's preStop hook, if it has one, for at most grace on the
// agent's clock, and returns how long it took (0 without a hook). A hook
// that fails or outlives grace gives eventFailedPreStopHook; a hook
// still running when grace ends is cancelled. The container is stopped
// afterwards either way.
func (a *Agent) preStop(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, grace time.Duration) time.Duration {
	if c == nil || c.Lifecycle == nil || c.Lifecycle.PreStop == nil || grace <= 0 {
		return 0
	}
	start := a.clock.Now()
	limit := a.clock.NewTimer(grace) // armed before the hook runs
	defer limit.Stop()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.runHook(hctx, handlerTarget{pod: pod, container: c, id: id}, c.Lifecycle.PreStop) }()
	var err error
	select {
	case err = <-done:
	case <-limit.C():
		cancel()
		<-done
		err = fmt.Errorf("not done within the grace period of %v", grace)
	}
	if err != nil && ctx.Err() == nil {
		a.emit(Event{Type: eventFailedPreStopHook, Pod: podKey(pod), Container: c.Name,
			Err: &hookError{Hook: "PreStop", Container: c.Name, Err: err}})
	}
	return a.clock.Since(start)
}

// stopTimeout is the StopContainer timeout left of grace once a preStop
// hook took used: whole seconds, never under minStopGraceSeconds.
func stopTimeout(grace, used time.Duration) int64 {
	left := int64(math.Ceil((grace - used).Seconds()))
	return max(left, minStopGraceSeconds)
}
