package agent

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	"github.com/syncpod/syncpod/concurrentstart"
	"github.com/syncpod/syncpod/concurrentstart/podplan"
	"github.com/syncpod/syncpod/criclient/podcri"
)

// syncSyncPod is one sync in syncpod mode. It reads the pod's status from
// the PLEG's event-fed cache (no List call), folds in what it did itself and
// the cache does not show yet (expectations; if they stay unmet it asks the
// PLEG for a relist of this pod), asks for every image of the pod at once
// without waiting, and starts what it can: the init chain up to the next
// regular init container (started sidecars gate what follows), then all
// regular containers concurrently. Whatever waits on an image or on an init
// container's exit is picked up when the pull or the PLEG wakes the worker.
func (a *Agent) syncSyncPod(ctx context.Context, pod *corev1.Pod) syncResult {
	now := a.clock.Now()
	expectWait := a.cfg.scaled(expectationTimeout)
	st, err := a.lifecycle.status(pod.UID)
	if err != nil { // the PLEG could not inspect the pod: ask again
		_ = a.lifecycle.p.RequestRelist(pod.UID)
		return syncResult{err: err}
	}
	exp := a.expectationsFor(pod.UID)
	waitSandbox, pending := exp.apply(st)
	if pending {
		if age := exp.age(now); age > 2*expectWait && exp.seenSince(st.Observed) {
			exp.reset() // the status, observed after the action, is the truth again
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
	acts, sbAttempt, early, done := a.beginSync(ctx, pod, st, true)
	if done {
		return early
	}
	a.volumes.setUp(pod)
	sb := a.podSandboxConfig(pod, sbAttempt)

	// Every image of the pod, now: pulls overlap sandbox creation and the
	// init chain, and a present image costs one map lookup.
	ready := map[string]bool{}
	var pullErrs []error
	waiting := false
	for _, image := range podImages(pod) {
		ok, err := a.images.ensure(ctx, pod.UID, image, pullPriority(pod, image), sb)
		ready[image] = ok
		if err != nil {
			pullErrs = append(pullErrs, err)
		}
		a.recordPull(pod, image, ok, err)
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
	if err := a.startSteps(ctx, pod, st, sandboxID, sbAttempt, acts, ready, exp); err != nil {
		errs = append(errs, err)
	}
	res := syncResult{requeueAfter: a.cfg.scaled(resyncPeriod)}
	if exp.outstanding() && expectWait < res.requeueAfter {
		// Normally an event wakes the worker first; if it was lost, this
		// sync finds the expectation overdue and asks for a pod relist.
		res.requeueAfter = expectWait + expectWait/2
	}
	if acts.backoffWait > 0 && acts.backoffWait < res.requeueAfter {
		res.requeueAfter = acts.backoffWait
	}
	if len(pullErrs) > 0 {
		a.pods.setMessage(pod.UID, errors.Join(pullErrs...).Error())
		if d := a.cfg.scaled(imagePullBackoff); d < res.requeueAfter {
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
	a.emit(Event{Type: eventSynced, Pod: podKey(pod), Err: res.err})
	return res
}

// errNotNow marks a container this sync does not start or wait for: its
// image is still being pulled, it is in crash-loop back-off, or it is an
// init container that has not exited yet. Whatever depends on it is skipped;
// the pull's completion or the PLEG's event wakes the worker for the rest.
var errNotNow = errors.New("not in this sync")

// startSteps runs this sync's starts as a concurrentstart plan built by
// podplan from the pod spec: init containers in order, a started sidecar
// gating what follows, then every regular container concurrently (and
// concurrentstart's start-after annotation honoured). Containers already
// running or completed are marked so; the plan never blocks the worker on
// an image or an init container's exit.
func (a *Agent) startSteps(ctx context.Context, pod *corev1.Pod, st *runtimePodStatus, sandboxID string, sbAttempt uint32,
	acts *podActions, ready map[string]bool, exp *expectations) error {
	if len(acts.initSteps) == 0 && len(acts.start) == 0 {
		return nil
	}
	steps := map[string]containerStart{}
	for _, s := range acts.initSteps {
		steps[s.spec.Name] = s
	}
	for _, s := range acts.start {
		steps[s.spec.Name] = s
	}
	var running, completed []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		l := st.Latest(c.Name)
		switch {
		case l == nil || acts.createSandbox:
		case !podcri.IsSidecar(c) && l.State == stateExited && l.ExitCode == 0:
			completed = append(completed, c.Name)
		case l.State == stateRunning:
			running = append(running, c.Name)
		}
	}
	initialized := false // a regular container has run: see computePodActions
	if !acts.createSandbox {
		for i := range pod.Spec.Containers {
			l := st.Latest(pod.Spec.Containers[i].Name)
			initialized = initialized || l != nil
			if l != nil && l.State == stateRunning {
				running = append(running, pod.Spec.Containers[i].Name)
			}
		}
	}
	funcs := podplan.Funcs{
		Start: func(ctx context.Context, c podplan.Container) error {
			step, ok := steps[c.Name]
			if !ok || !ready[step.spec.Image] {
				return errNotNow
			}
			if err := a.startContainer(ctx, pod, sandboxID, sbAttempt, step); err != nil {
				if errors.Is(err, errPostStartHook) {
					// It was started (and killed): the status will show it.
					exp.container(c.Name, step.attempt, a.clock.Now())
				}
				a.emit(Event{Type: eventStartError, Pod: podKey(pod), Container: c.Name, Err: err})
				return err
			}
			exp.container(c.Name, step.attempt, a.clock.Now())
			return nil
		},
		// An init container's exit arrives as a PLEG event, which wakes
		// the worker for the next step: never wait for it here.
		WaitCompleted: func(context.Context, podplan.Container) error { return errNotNow },
		// Nor for a probe: the prober wakes the worker when the verdict
		// changes. A sidecar's check is its startup probe (until the pod
		// first initialised, as computePodActions gates it); a regular
		// container's, which a start-after ":ready" edge waits for, is its
		// startup probe and its readiness.
		WaitStartup: func(_ context.Context, c podplan.Container) error {
			var id string
			if l := st.Latest(c.Name); l != nil && l.State == stateRunning && !acts.createSandbox {
				id = l.ID
			}
			started, ready := a.probeState(pod.UID, c.Name, id)
			switch {
			case c.Role == podplan.Sidecar && (started || initialized):
				return nil
			case c.Role == podplan.Regular && started && ready:
				return nil
			}
			return errNotNow
		},
		HasStartupCheck: func(c podplan.Container) bool {
			return c.Spec.StartupProbe != nil || (c.Role == podplan.Regular && c.Spec.ReadinessProbe != nil)
		},
	}
	nodes, err := podplan.Build(pod, funcs, podplan.WithRunning(running...), podplan.WithCompleted(completed...))
	if err != nil {
		return fmt.Errorf("start plan: %w", err)
	}
	plan, err := concurrentstart.New(nodes, concurrentstart.WithMaxParallel(a.cfg.startParallel))
	if err != nil {
		return fmt.Errorf("start plan: %w", err)
	}
	// Run's error is a *RunError whenever a node did not succeed, which
	// includes every errNotNow: the per-node results say what really failed.
	report, _ := plan.Run(ctx)
	var errs []error
	for _, r := range report.Results {
		if r.Err != nil && !errors.Is(r.Err, errNotNow) && !errors.Is(r.Err, context.Canceled) {
			errs = append(errs, r.Err)
		}
	}
	return errors.Join(errs...)
}
