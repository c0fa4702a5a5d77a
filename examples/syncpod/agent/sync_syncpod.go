package agent

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
)

// syncSyncPod is one sync in syncpod mode. It inspects its own pod on
// demand (events are only hints), asks for every image of the pod at once
// without waiting, and starts what it can: the init chain up to the next
// regular init container (started sidecars gate what follows), then all
// regular containers concurrently. Whatever waits on an image or on an init
// container's exit is picked up when the pull or the PLEG wakes the worker.
func (a *Agent) syncSyncPod(ctx context.Context, pod *corev1.Pod) syncResult {
	now := a.clock.Now()
	expectWait := a.cfg.scaled(ExpectationTimeout)
	st, err := a.lifecycle.status(pod.UID)
	if err != nil { // the PLEG could not inspect the pod: ask again
		_ = a.lifecycle.p.RequestRelist(pod.UID)
		return syncResult{err: err}
	}
	exp := a.expectationsFor(pod.UID)
	waitSandbox, pending := exp.apply(st)
	if pending {
		if age := exp.age(now); age > 2*expectWait {
			exp.reset() // the status is the truth again
			st, _ = a.lifecycle.status(pod.UID)
			waitSandbox, pending = false, false
		} else if age > expectWait {
			_ = a.lifecycle.p.RequestRelist(pod.UID)
		}
	}
	if waitSandbox {
		return syncResult{requeueAfter: expectWait}
	}
	a.cache.Set(pod.UID, st, nil, now)
	acts := computePodActions(pod, st, a.backoff, true)
	a.observe(pod, st, acts)
	if acts.podFailed && st.SandboxReady {
		if err := a.rt.StopPodSandbox(ctx, st.SandboxID); err != nil {
			return syncResult{err: fmt.Errorf("StopPodSandbox: %w", err)}
		}
	}
	if acts.finished {
		return syncResult{}
	}
	sbAttempt := sandboxAttempt(st, acts)
	sb := sandboxConfig(pod, sbAttempt)

	// Every image of the pod, now: pulls overlap sandbox creation and the
	// init chain, and a present image costs one map lookup.
	ready := map[string]bool{}
	var pullErrs []error
	waiting := false
	for _, image := range podImages(pod) {
		ok, err := a.images.ensure(ctx, pod.UID, image, sb)
		ready[image] = ok
		if err != nil {
			pullErrs = append(pullErrs, err)
		}
		waiting = waiting || !ok
	}
	a.pods.pullWaiting(pod.UID, a.clock.Now(), waiting)

	sandboxID := st.SandboxID
	if acts.createSandbox {
		id, err := a.runSandbox(ctx, pod, st, acts)
		if err != nil {
			return syncResult{err: err}
		}
		exp.sandbox(id, a.clock.Now())
		sandboxID = id
	}

	var errs []error
	if len(acts.kill) > 0 {
		g, gctx := errgroup.WithContext(ctx)
		for _, k := range acts.kill {
			g.Go(func() error { return a.killContainer(gctx, pod, k) })
		}
		if err := g.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := a.startSteps(ctx, pod, sandboxID, sbAttempt, acts, ready, exp); err != nil {
		errs = append(errs, err)
	}
	res := syncResult{requeueAfter: a.cfg.scaled(ResyncPeriod)}
	if pending && expectWait < res.requeueAfter {
		res.requeueAfter = expectWait
	}
	if acts.backoffWait > 0 && acts.backoffWait < res.requeueAfter {
		res.requeueAfter = acts.backoffWait
	}
	if len(pullErrs) > 0 {
		a.pods.setMessage(pod.UID, errors.Join(pullErrs...).Error())
		if d := a.cfg.scaled(ImagePullBackoff); d < res.requeueAfter {
			res.requeueAfter = d
		}
	}
	if err := errors.Join(errs...); err != nil {
		a.pods.setMessage(pod.UID, err.Error())
		if ctx.Err() == nil {
			a.log.Info("sync failed", zap.String("pod", podKey(pod)), zap.Error(err))
		}
		res.err = err
	}
	a.emit(Event{Type: EventSynced, Pod: podKey(pod), Err: res.err})
	return res
}

// startSteps starts the init chain in order, stopping at an image that is
// not present yet or at a regular init container (it must exit first), and,
// when init is done, every regular container whose image is present,
// concurrently.
func (a *Agent) startSteps(ctx context.Context, pod *corev1.Pod, sandboxID string, sbAttempt uint32, acts *podActions, ready map[string]bool, exp *expectations) error {
	for _, step := range acts.initSteps {
		if !ready[step.spec.Image] {
			return nil
		}
		if err := a.startContainer(ctx, pod, sandboxID, sbAttempt, step); err != nil {
			a.emit(Event{Type: EventStartError, Pod: podKey(pod), Container: step.spec.Name, Err: err})
			return err
		}
		exp.container(step.spec.Name, step.attempt, a.clock.Now())
		if !step.sidecar {
			return nil
		}
	}
	if len(acts.start) == 0 {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(a.cfg.startParallel)
	var mu = make(chan struct{}, 1)
	var errs []error
	for _, step := range acts.start {
		if !ready[step.spec.Image] {
			continue
		}
		g.Go(func() error {
			if err := a.startContainer(gctx, pod, sandboxID, sbAttempt, step); err != nil {
				a.emit(Event{Type: EventStartError, Pod: podKey(pod), Container: step.spec.Name, Err: err})
				mu <- struct{}{}
				errs = append(errs, err)
				<-mu
				return nil
			}
			exp.container(step.spec.Name, step.attempt, a.clock.Now())
			return nil // one failed container does not stop the others
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}
