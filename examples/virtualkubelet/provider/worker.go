package provider

import (
	"context"
	"errors"
	"fmt"
	"github.com/syncpod/syncpod/internal/backoff"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/concurrentstart"
	"github.com/syncpod/syncpod/concurrentstart/podplan"
	"github.com/syncpod/syncpod/pleg"
)

// errBackOff ends a container start refused by its crash-loop back-off.
var errBackOff = errors.New("container restart in back-off")

// freshnessWait bounds how long a sync waits for the PLEG to report the
// effects of the previous sync's actions before working on older state.
const freshnessWait = 10 * time.Second

// podWorker owns one pod: it syncs the pod in its own goroutine whenever
// woken (spec update, PLEG event, finished pull, timer) and stops it on
// deletion.
type podWorker struct {
	p     *Provider
	key   string
	uid   types.UID
	wakeC chan struct{}

	pubMu sync.Mutex // serialises status computation and publication

	mu         sync.Mutex
	pod        *corev1.Pod
	deleting   *corev1.Pod
	syncCancel context.CancelFunc
	startTime  time.Time
	sandboxID  string
	sandboxCfg *runtimeapi.PodSandboxConfig
	podReason  *waiting
	reasons    map[string]waiting
	ids        map[string]string      // container name -> id of its latest instance
	crash      *backoff.Keyed[string] // per container: restart back-off (guarded by mu)
	exitSeen   map[string]time.Time   // container id -> when the worker first saw it exited
	lastExited map[string]*runtimeapi.ContainerStatus
	finished   bool // nothing will run again; the sandbox is stopped
	requeue    time.Duration
	lastAction time.Time
	published  *corev1.PodStatus
}

func newPodWorker(p *Provider, pod *corev1.Pod) *podWorker {
	return &podWorker{
		p:         p,
		key:       podKey(pod.Namespace, pod.Name),
		uid:       pod.UID,
		wakeC:     make(chan struct{}, 1),
		pod:       pod,
		startTime: p.cfg.clock.Now(),
		reasons:   map[string]waiting{},
		ids:       map[string]string{},
		crash:     backoff.NewKeyed[string](backoff.Policy{Initial: p.cfg.crashInitial, Max: p.cfg.crashMax}),
		exitSeen:  map[string]time.Time{},

		lastExited: map[string]*runtimeapi.ContainerStatus{},
	}
}

func (w *podWorker) wake() {
	select {
	case w.wakeC <- struct{}{}:
	default:
	}
}

func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	w.wake()
}

func (w *podWorker) delete(pod *corev1.Pod) {
	w.mu.Lock()
	if w.deleting == nil {
		w.deleting = pod
	}
	if w.syncCancel != nil {
		w.syncCancel()
	}
	w.mu.Unlock()
	w.wake()
}

func (w *podWorker) run(ctx context.Context) {
	defer w.p.wg.Done()
	clk := w.p.cfg.clock
	for {
		w.mu.Lock()
		deleting := w.deleting
		syncCtx, cancel := context.WithCancel(ctx)
		w.syncCancel = cancel
		w.requeue = 0
		w.mu.Unlock()
		if deleting != nil {
			cancel()
			w.terminate(ctx, deleting)
			return
		}
		w.sync(syncCtx)
		cancel()
		w.p.publish(w)

		w.mu.Lock()
		requeue := w.requeue
		w.mu.Unlock()
		var timerC <-chan time.Time
		var timer interface{ Stop() bool }
		if requeue > 0 {
			t := clk.NewTimer(requeue)
			timer, timerC = t, t.C()
		}
		select {
		case <-ctx.Done():
		case <-w.wakeC:
		case <-timerC:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// requeueIn asks for another sync within d.
func (w *podWorker) requeueIn(d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	w.mu.Lock()
	if w.requeue == 0 || d < w.requeue {
		w.requeue = d
	}
	w.mu.Unlock()
}

func (w *podWorker) setReason(name, reason, message string) {
	w.mu.Lock()
	w.reasons[name] = waiting{reason: reason, message: message, since: w.p.cfg.clock.Now()}
	w.mu.Unlock()
}

// showsPullFailure reports how much longer the container keeps showing the
// pull failure it got: a failed pull is shown (ErrImagePull ...) until
// errorResync has passed, whatever wakes the pod meanwhile (a PLEG event
// of another container, say), so that a user sees why before the status
// turns to ImagePullBackOff.
func (w *podWorker) showsPullFailure(name string) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.reasons[name]
	if !ok || r.reason == asyncpull.ReasonImagePullBackOff || r.reason == ReasonCrashLoopBackOff ||
		r.reason == ReasonCreateContainerErr || r.reason == ReasonRunContainerError {
		return 0, false
	}
	left := w.p.cfg.errorResync - w.p.cfg.clock.Since(r.since)
	return left, left > 0
}

func (w *podWorker) clearReason(name string) {
	w.mu.Lock()
	delete(w.reasons, name)
	w.mu.Unlock()
}

// markAction records that the worker changed the runtime. The time is on
// the wall clock, the PLEG's, because it is compared with the times the
// PLEG writes the cache with.
func (w *podWorker) markAction() {
	w.mu.Lock()
	w.lastAction = time.Now()
	w.mu.Unlock()
}

// relist asks the PLEG to look at the pod now rather than at its next
// relist or event.
func (w *podWorker) relist() {
	if err := w.p.pleg.RequestRelist(w.uid); err != nil && !errors.Is(err, pleg.ErrClosed) {
		w.p.cfg.logger.Debug("request relist", zap.String("pod", w.key), zap.Error(err))
	}
}

// waitFresh waits until the runtime cache reflects the previous sync's
// actions, so this sync does not act on state from before them (the
// kubelet's GetNewerThan before each sync).
func (w *podWorker) waitFresh(ctx context.Context) {
	w.mu.Lock()
	last := w.lastAction
	w.mu.Unlock()
	if last.IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, freshnessWait)
	defer cancel()
	_, _ = w.p.runtimeCache.GetNewerThan(ctx, w.uid, last)
}

// sync moves the pod one step closer to its spec: sandbox, then the
// containers that must (re)start, through a podplan run.
func (w *podWorker) sync(ctx context.Context) {
	p := w.p
	w.waitFresh(ctx)
	w.mu.Lock()
	pod := w.pod
	finished := w.finished
	sbID, sbCfg := w.sandboxID, w.sandboxCfg
	w.mu.Unlock()
	if finished || ctx.Err() != nil {
		return
	}
	st, _ := p.runtimeCache.Get(w.uid)
	if sbID == "" && st != nil && len(st.SandboxStatuses) > 0 {
		sbID = st.SandboxStatuses[0].GetId() // newest first
	}
	v := newRuntimeView(st, sbID)

	// The sandbox.
	if sbID == "" || (v.sandbox != nil && v.sandbox.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY) {
		var attempt uint32
		if sbID != "" {
			if pod.Spec.RestartPolicy == corev1.RestartPolicyNever && len(v.latest) > 0 {
				w.finish(ctx, sbID, v) // it ran, and its sandbox died: Never means it stays down
				return
			}
			if v.sandbox != nil {
				attempt = v.sandbox.GetMetadata().GetAttempt() + 1
			}
			_ = p.rt.StopPodSandbox(ctx, sbID)
		}
		cfg, err := p.sandboxConfig(pod, attempt)
		var id string
		if err == nil {
			id, err = p.rt.RunPodSandbox(ctx, cfg, runtimeHandler(pod))
		}
		if err != nil {
			if ctx.Err() == nil {
				w.mu.Lock()
				w.podReason = &waiting{reason: ReasonFailedCreatePodSandBox, message: err.Error()}
				w.mu.Unlock()
				w.requeueIn(p.cfg.errorResync)
			}
			return
		}
		w.mu.Lock()
		w.podReason = nil
		w.sandboxID, w.sandboxCfg = id, cfg
		w.ids = map[string]string{}
		w.mu.Unlock()
		w.markAction()
		w.relist()
		sbID, sbCfg = id, cfg
		v = newRuntimeView(st, sbID)
		p.publish(w)
	}
	if sbCfg == nil {
		var err error
		if sbCfg, err = p.sandboxConfig(pod, v.sandbox.GetMetadata().GetAttempt()); err != nil {
			w.requeueIn(p.cfg.errorResync)
			return
		}
		w.mu.Lock()
		w.sandboxID, w.sandboxCfg = sbID, sbCfg
		w.mu.Unlock()
	}

	// What runs, what is done, what must (re)start.
	var running, completed []string
	podFailed := false
	w.mu.Lock()
	now := p.cfg.clock.Now()
	current := map[string]bool{}
	for name, cs := range v.latest {
		w.ids[name] = cs.GetId()
		current[cs.GetId()] = true
		if _, ok := w.exitSeen[cs.GetId()]; !ok && cs.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			w.exitSeen[cs.GetId()] = now
		}
	}
	for id := range w.exitSeen {
		if !current[id] {
			delete(w.exitSeen, id) // replaced: only latest instances wait for a restart
		}
	}
	w.mu.Unlock()
	restartable := func(c *corev1.Container, cs *runtimeapi.ContainerStatus) bool {
		switch pod.Spec.RestartPolicy {
		case corev1.RestartPolicyNever:
			return false
		case corev1.RestartPolicyOnFailure:
			return cs.GetExitCode() != 0
		}
		return true
	}
	classify := func(c *corev1.Container, init bool) {
		cs := v.latest[c.Name]
		if cs == nil {
			return
		}
		switch cs.GetState() {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			if cs.GetAnnotations()[annotationHash] != "" && cs.GetAnnotations()[annotationHash] != containerHash(c) && (!init || isSidecar(c)) {
				w.kill(ctx, pod, cs.GetId(), "spec changed")
				return
			}
			running = append(running, c.Name)
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			switch {
			case init && isSidecar(c):
			case init && cs.GetExitCode() == 0:
				completed = append(completed, c.Name)
			case init && pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
				podFailed = true
			case init:
			case !restartable(c, cs):
				completed = append(completed, c.Name)
			}
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			// Created but never started (a start that failed or was
			// cancelled): replace it.
			_ = p.rt.RemoveContainer(ctx, cs.GetId())
			w.markAction()
		default:
			running = append(running, c.Name)
		}
	}
	for i := range pod.Spec.InitContainers {
		classify(&pod.Spec.InitContainers[i], true)
	}
	for i := range pod.Spec.Containers {
		classify(&pod.Spec.Containers[i], false)
	}
	if podFailed || (len(completed) >= len(pod.Spec.Containers) && allRegularDone(pod, completed)) {
		w.finish(ctx, sbID, v)
		return
	}

	nodes, err := podplan.Build(pod, podplan.Funcs{
		Start: func(ctx context.Context, c podplan.Container) error {
			return w.startContainer(ctx, pod, c, v, sbID, sbCfg)
		},
		WaitCompleted: w.waitCompleted,
	}, podplan.WithRunning(running...), podplan.WithCompleted(completed...))
	if err != nil {
		// Validated at CreatePod: only a state the plan finds impossible
		// gets here; look again later.
		p.cfg.logger.Warn("build start plan", zap.String("pod", w.key), zap.Error(err))
		w.requeueIn(p.cfg.errorResync)
		return
	}
	if len(nodes) == 0 {
		return
	}
	plan, err := concurrentstart.New(nodes, concurrentstart.WithMaxParallel(p.cfg.maxParallelStarts))
	if err != nil {
		w.requeueIn(p.cfg.errorResync)
		return
	}
	if _, err := plan.Run(ctx); err != nil && ctx.Err() == nil {
		p.cfg.logger.Debug("start plan", zap.String("pod", w.key), zap.Error(err))
	}
}

func allRegularDone(pod *corev1.Pod, completed []string) bool {
	done := map[string]bool{}
	for _, n := range completed {
		done[n] = true
	}
	for i := range pod.Spec.Containers {
		if !done[pod.Spec.Containers[i].Name] {
			return false
		}
	}
	return true
}

func runtimeHandler(pod *corev1.Pod) string {
	if pod.Spec.RuntimeClassName != nil {
		return *pod.Spec.RuntimeClassName
	}
	return ""
}

func pullPolicy(p corev1.PullPolicy) asyncpull.PullPolicy {
	switch p {
	case corev1.PullAlways:
		return asyncpull.PullAlways
	case corev1.PullNever:
		return asyncpull.PullNever
	}
	return asyncpull.PullIfNotPresent
}

// inCrashBackOff reports whether the container that finished at finished
// must wait before its restart, how long, and the current delay. The exit
// time is when the worker saw the exit, on the provider's clock, rather
// than the runtime's FinishedAt: back-off then works on any clock, fake
// ones included, at the cost of the PLEG's latency.
func (w *podWorker) inCrashBackOff(name string, finished time.Time) (time.Duration, time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.p.cfg.clock.Now()
	w.crash.Forget(now) // a container that ran long enough starts over
	delay, ok := w.crash.Delay(name)
	if !ok {
		return 0, 0, false
	}
	if left := delay - now.Sub(finished); left > 0 {
		return left, delay, true
	}
	return 0, delay, false
}

// crashNext records a restart: the next one waits longer.
func (w *podWorker) crashNext(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.crash.Fail(name, w.p.cfg.clock.Now())
}

// startContainer ensures c's image, then creates and starts its next
// instance. Failures are recorded as the container's waiting reason.
func (w *podWorker) startContainer(ctx context.Context, pod *corev1.Pod, c podplan.Container, v runtimeView, sbID string, sbCfg *runtimeapi.PodSandboxConfig) error {
	p := w.p
	name := c.Name
	prev := v.latest[name]
	restart := prev != nil && prev.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED
	if restart {
		w.mu.Lock()
		exited, ok := w.exitSeen[prev.GetId()]
		w.mu.Unlock()
		if !ok {
			exited = p.cfg.clock.Now()
		}
		if left, delay, in := w.inCrashBackOff(name, exited); in {
			w.setReason(name, ReasonCrashLoopBackOff, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, name, pod.Name, pod.Namespace, pod.UID))
			w.requeueIn(left)
			p.publish(w)
			return errBackOff
		}
	}
	res, err := p.pulls.Wait(ctx, asyncpull.Request{
		Image:            c.Spec.Image,
		PullPolicy:       pullPolicy(c.Spec.ImagePullPolicy),
		PodUID:           w.uid,
		PodSandboxConfig: sbCfg,
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if res.State != asyncpull.StatePresent {
		reason := res.Reason
		if reason == "" {
			reason = asyncpull.ReasonErrImagePull
		}
		msg := ""
		if res.Err != nil {
			msg = res.Err.Error()
		} else if err != nil {
			msg = err.Error()
		}
		next := p.cfg.errorResync
		if res.State == asyncpull.StateBackOff {
			msg = fmt.Sprintf("Back-off pulling image %q: %s", c.Spec.Image, msg)
			if d := res.BackOffUntil.Sub(p.cfg.clock.Now()); d > 0 {
				next = d
			}
		}
		if left, keep := w.showsPullFailure(name); keep && res.State == asyncpull.StateBackOff {
			w.requeueIn(left)
		} else {
			w.setReason(name, reason, msg)
			w.requeueIn(next)
		}
		p.publish(w)
		return fmt.Errorf("container %s: image %s: %s", name, c.Spec.Image, reason)
	}
	// Keep the latest exited instance (its state is lastState); remove older ones.
	for _, old := range v.exited[name] {
		if old != prev {
			_ = p.rt.RemoveContainer(ctx, old.GetId())
		}
	}
	attempt := v.nextAttempt(name)
	cfg, err := p.containerConfig(pod, c, attempt, res.ImageRef, sbID)
	if err == nil && cfg.LogPath != "" && sbCfg.GetLogDirectory() != "" {
		err = os.MkdirAll(filepath.Join(sbCfg.GetLogDirectory(), name), 0o755)
	}
	var id string
	if err == nil {
		id, err = p.rt.CreateContainer(ctx, sbID, cfg, sbCfg)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.setReason(name, ReasonCreateContainerErr, err.Error())
		w.requeueIn(p.cfg.errorResync)
		p.publish(w)
		return fmt.Errorf("container %s: create: %w", name, err)
	}
	w.mu.Lock()
	w.ids[name] = id
	w.mu.Unlock()
	w.markAction()
	if restart {
		w.crashNext(name)
	}
	if err := p.rt.StartContainer(ctx, id); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.setReason(name, ReasonRunContainerError, err.Error())
		if !restart {
			w.crashNext(name)
		}
		w.requeueIn(p.cfg.errorResync)
		w.relist()
		p.publish(w)
		return fmt.Errorf("container %s: start: %w", name, err)
	}
	w.clearReason(name)
	w.markAction()
	w.relist()
	p.publish(w)
	return nil
}

// waitCompleted waits for the latest instance of an init container to
// exit: nil for exit code 0.
func (w *podWorker) waitCompleted(ctx context.Context, c podplan.Container) error {
	cache := w.p.runtimeCache
	since := time.Now() // the PLEG's clock
	for {
		w.mu.Lock()
		id := w.ids[c.Name]
		w.mu.Unlock()
		if st, _ := cache.Get(w.uid); st != nil {
			for _, cs := range st.ContainerStatuses {
				if cs.GetId() != id || cs.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
					continue
				}
				if cs.GetExitCode() == 0 {
					return nil
				}
				return fmt.Errorf("init container %s exited with code %d", c.Name, cs.GetExitCode())
			}
			if st.Timestamp.After(since) {
				since = st.Timestamp
			}
		}
		if gt, ok := cache.GlobalTime(); ok && gt.After(since) {
			since = gt
		}
		if _, err := cache.GetNewerThan(ctx, w.uid, since); err != nil {
			return err
		}
	}
}

// kill stops and removes one container.
func (w *podWorker) kill(ctx context.Context, pod *corev1.Pod, id, why string) {
	w.p.cfg.logger.Info("killing container", zap.String("pod", w.key), zap.String("id", id), zap.String("why", why))
	_ = w.p.rt.StopContainer(ctx, id, int64(w.p.gracePeriod(pod)/time.Second))
	_ = w.p.rt.RemoveContainer(ctx, id)
	w.markAction()
	w.relist()
}

// finish stops what still runs of a pod that will run nothing more
// (sidecars of a completed pod, the sandbox) and marks it finished.
func (w *podWorker) finish(ctx context.Context, sbID string, v runtimeView) {
	w.mu.Lock()
	pod := w.pod
	w.mu.Unlock()
	for _, cs := range v.latest {
		if cs.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			_ = w.p.rt.StopContainer(ctx, cs.GetId(), int64(w.p.gracePeriod(pod)/time.Second))
		}
	}
	if err := w.p.rt.StopPodSandbox(ctx, sbID); err != nil {
		w.requeueIn(w.p.cfg.errorResync)
		return
	}
	w.mu.Lock()
	w.finished = true
	w.mu.Unlock()
	w.markAction()
	w.relist()
}

// terminate stops and removes the pod for DeletePod and publishes its
// terminal status. It retries runtime errors until it succeeds or the
// provider closes.
func (w *podWorker) terminate(ctx context.Context, deleting *corev1.Pod) {
	p := w.p
	defer p.forget(w)
	p.pulls.Cancel(w.uid)
	grace := int64(p.gracePeriod(deleting) / time.Second)
	for {
		final, err := w.stopAll(ctx, grace)
		if err == nil {
			w.publishFinal(deleting, final)
			return
		}
		p.cfg.logger.Warn("stopping pod", zap.String("pod", w.key), zap.Error(err))
		t := p.cfg.clock.NewTimer(p.cfg.errorResync)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// stopAll stops every container and sandbox of the pod, reads their final
// statuses straight from the runtime, and removes them.
func (w *podWorker) stopAll(ctx context.Context, grace int64) (*pleg.PodStatus, error) {
	rt := w.p.rt
	sel := map[string]string{labelPodUID: string(w.uid)}
	sandboxes, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(containers))
	for i, c := range containers {
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rt.StopContainer(ctx, c.GetId(), grace); err != nil {
				errs[i] = fmt.Errorf("stop container %s: %w", c.GetMetadata().GetName(), err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	final := &pleg.PodStatus{ID: w.uid, Timestamp: w.p.cfg.clock.Now()}
	for _, sb := range sandboxes {
		if err := rt.StopPodSandbox(ctx, sb.GetId()); err != nil {
			return nil, fmt.Errorf("stop sandbox: %w", err)
		}
		if resp, err := rt.PodSandboxStatus(ctx, sb.GetId(), false); err == nil && resp.GetStatus() != nil {
			final.SandboxStatuses = append(final.SandboxStatuses, resp.GetStatus())
		}
	}
	for _, c := range containers {
		if resp, err := rt.ContainerStatus(ctx, c.GetId(), false); err == nil && resp.GetStatus() != nil {
			final.ContainerStatuses = append(final.ContainerStatuses, resp.GetStatus())
		}
	}
	sort.SliceStable(final.ContainerStatuses, func(i, j int) bool {
		return final.ContainerStatuses[i].GetCreatedAt() > final.ContainerStatuses[j].GetCreatedAt()
	})
	sort.SliceStable(final.SandboxStatuses, func(i, j int) bool {
		return final.SandboxStatuses[i].GetCreatedAt() > final.SandboxStatuses[j].GetCreatedAt()
	})
	for _, sb := range sandboxes {
		if err := rt.RemovePodSandbox(ctx, sb.GetId()); err != nil {
			return nil, fmt.Errorf("remove sandbox: %w", err)
		}
	}
	return final, nil
}

// publishFinal delivers the terminal status of a deleted pod.
func (w *podWorker) publishFinal(deleting *corev1.Pod, final *pleg.PodStatus) {
	w.pubMu.Lock()
	defer w.pubMu.Unlock()
	w.mu.Lock()
	pod := w.pod.DeepCopy()
	sbID := w.sandboxID
	if sbID == "" && len(final.SandboxStatuses) > 0 {
		sbID = final.SandboxStatuses[0].GetId()
	}
	w.rememberExitsLocked(final)
	lastExited := make(map[string]*runtimeapi.ContainerStatus, len(w.lastExited))
	for k, v := range w.lastExited {
		lastExited[k] = v
	}
	in := &statusInput{
		pod: pod, runtime: final, sandboxID: sbID, reasons: nil, lastExited: lastExited,
		startTime: w.startTime, runtimeName: w.p.runtimeName, nodeIP: w.p.cfg.nodeIP,
		terminal: true, prev: w.published, now: w.p.cfg.clock.Now(),
	}
	w.mu.Unlock()
	pod.Status = buildStatus(in)
	pod.DeletionTimestamp = deleting.DeletionTimestamp
	pod.DeletionGracePeriodSeconds = deleting.DeletionGracePeriodSeconds
	w.mu.Lock()
	w.published = pod.Status.DeepCopy()
	w.mu.Unlock()
	w.p.notifier.enqueue(string(w.uid), pod)
}

// status computes the pod as it stands; terminal reports whether the pod
// was deleted (its final status is published by publishFinal).
func (w *podWorker) status() (*corev1.Pod, bool) {
	st, _ := w.p.runtimeCache.Get(w.uid)
	w.mu.Lock()
	if w.deleting != nil {
		w.mu.Unlock()
		return nil, true
	}
	reasons := make(map[string]waiting, len(w.reasons))
	for k, v := range w.reasons {
		reasons[k] = v
	}
	w.rememberExitsLocked(st)
	lastExited := make(map[string]*runtimeapi.ContainerStatus, len(w.lastExited))
	for k, v := range w.lastExited {
		lastExited[k] = v
	}
	pod := w.pod.DeepCopy()
	in := &statusInput{
		pod: pod, runtime: st, sandboxID: w.sandboxID, reasons: reasons, podReason: w.podReason,
		startTime: w.startTime, runtimeName: w.p.runtimeName, nodeIP: w.p.cfg.nodeIP,
		terminal: w.finished, prev: w.published, now: w.p.cfg.clock.Now(), lastExited: lastExited,
	}
	if in.sandboxID == "" && st != nil && len(st.SandboxStatuses) > 0 {
		in.sandboxID = st.SandboxStatuses[0].GetId()
	}
	w.mu.Unlock()
	pod.Status = buildStatus(in)
	return pod, false
}

// rememberExitsLocked keeps the newest exited instance of each container,
// for its lastState once the runtime's view no longer shows it.
func (w *podWorker) rememberExitsLocked(st *pleg.PodStatus) {
	if st == nil {
		return
	}
	for _, cs := range st.ContainerStatuses {
		if cs.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
			continue
		}
		name := cs.GetMetadata().GetName()
		if old := w.lastExited[name]; old == nil || cs.GetCreatedAt() > old.GetCreatedAt() {
			w.lastExited[name] = cs
		}
	}
}

// changed records pod's status as published and reports whether it
// differs from the previous one.
func (w *podWorker) changed(pod *corev1.Pod) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.published != nil && apiequality.Semantic.DeepEqual(*w.published, pod.Status) {
		return false
	}
	w.published = pod.Status.DeepCopy()
	return true
}
