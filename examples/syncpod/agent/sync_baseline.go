package agent

import (
	"context"
	"errors"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
)

// syncBaseline is one sync the way today's kubelet does it: wait until the
// relist PLEG has written a status newer than the end of the last sync,
// then create the sandbox, start at most one init step, or start the
// regular containers one after another, each pulling its image (serialized
// node-wide) while the worker waits.
func (a *Agent) syncBaseline(ctx context.Context, pod *corev1.Pod) syncResult {
	a.mu.Lock()
	last := a.lastSync[pod.UID]
	a.mu.Unlock()
	t0 := a.clock.Now()
	st, err := a.cache.GetNewerThan(ctx, pod.UID, last)
	a.blocked.add(a.clock.Since(t0))
	if ctx.Err() != nil {
		return syncResult{err: ctx.Err()}
	}
	defer func() {
		a.mu.Lock()
		a.lastSync[pod.UID] = a.clock.Now()
		a.mu.Unlock()
	}()
	if err != nil {
		return syncResult{err: err}
	}
	if st == nil {
		st = &runtimePodStatus{UID: pod.UID}
		st.index()
	}
	acts, sbAttempt, early, done := a.beginSync(ctx, pod, st, false)
	if done {
		return early
	}
	a.volumes.setUp(pod)
	sb := a.podSandboxConfig(pod, sbAttempt)
	sandboxID := st.SandboxID
	if acts.createSandbox {
		id, err := a.runSandbox(ctx, pod, st, acts)
		if err != nil {
			return syncResult{err: err}
		}
		sandboxID = id
	}
	var errs []error
	for _, k := range acts.kill {
		if err := a.killContainer(ctx, pod, k); err != nil {
			errs = append(errs, err)
		}
	}
	start := func(step containerStart) error {
		t := a.clock.Now()
		_, err := a.images.ensure(ctx, pod.UID, step.spec.Image, 0, sb)
		d := a.clock.Since(t)
		a.blocked.add(d)
		a.pods.addPullWait(pod.UID, d)
		a.recordPull(pod, step.spec.Image, err == nil, err)
		if err != nil {
			return err
		}
		if err := a.startContainer(ctx, pod, sandboxID, sbAttempt, step); err != nil {
			a.emit(Event{Type: eventStartError, Pod: podKey(pod), Container: step.spec.Name, Err: err})
			return err
		}
		return nil
	}
	if len(acts.initSteps) > 0 {
		if err := start(acts.initSteps[0]); err != nil {
			errs = append(errs, err)
		}
	} else {
		for _, step := range acts.start {
			if ctx.Err() != nil {
				break
			}
			if err := start(step); err != nil {
				errs = append(errs, err)
			}
		}
	}
	res := syncResult{requeueAfter: a.cfg.scaled(resyncPeriod)}
	if acts.backoffWait > 0 && acts.backoffWait < res.requeueAfter {
		res.requeueAfter = acts.backoffWait
	}
	if err := errors.Join(errs...); err != nil {
		a.pods.setMessage(pod.UID, err.Error())
		if ctx.Err() == nil {
			a.log.Info("sync failed", zap.String("pod", podKey(pod)), zap.Error(err))
		}
		res.err = err
	}
	a.emit(Event{Type: eventSynced, Pod: podKey(pod), Err: res.err})
	return res
}
