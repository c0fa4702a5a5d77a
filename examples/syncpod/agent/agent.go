package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/concurrentstart/admission"
	"github.com/syncpod/syncpod/examples/syncpod/agent/baseline"
	"github.com/syncpod/syncpod/podworkers"
)

// ErrStopped is returned by calls on a stopped Agent.
var ErrStopped = errors.New("agent: stopped")

// Agent runs pods on a CRI runtime: one worker per pod, each sync
// computing what to do from the runtime's status.
type Agent struct {
	cfg     config
	runtime *runtimeLayer // every CRI call goes through it
	clock   clock.WithTickerAndDelayedExecution
	log     *zap.Logger
	metrics *metrics

	inspector    *inspector
	cache        statusStore
	backoff      *crashBackoff
	images       imageGate
	mode         podSyncMode         // the mode's SyncPod: syncpod or baseline
	workers      *podworkers.Workers // the library's pod workers, calling syncer
	syncer       *podSyncer
	readds       readdSet              // pods added again while terminating
	orphans      orphanWaits           // RemoveOrphans waiting for the workers
	source       statusSource          // the PLEG: evented (syncpod) or relisting (baseline)
	relister     *relister             // baseline: source, for its sync
	lifecycle    *eventedLifecycle     // syncpod: source, for its sync
	admission    *admission.Controller // syncpod: node-wide start admission (nil: none)
	ownAdmission bool                  // made by New, closed by Stop
	pods         *podRecords
	expects      map[types.UID]*expectations // syncpod: what workers did and have not seen yet
	prober       *prober                     // startup, readiness and liveness probes of every pod
	volumes      *volumeManager

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	active *activity // work in hand (see quiescent)

	stopOnce sync.Once // Stop's work runs once; every caller waits for it

	notifier *statusNotifier // nil without WithPodStatusHook
	nameOnce sync.Once
	rtName   string // the runtime's name (runtimeName)

	mu      sync.Mutex
	started bool
	stopped bool

	blocked       durationCounter // time workers spent blocked (pulls, cache waits)
	unhealthy     durationCounter // time PLEG reported unhealthy (sampled)
	healthStatus  healthState
	runtimeHealth runtimeHealth
}

type healthState struct {
	mu      sync.Mutex
	healthy bool
	err     error
	mode    string
}

type durationCounter struct {
	mu sync.Mutex
	d  time.Duration
}

func (c *durationCounter) add(d time.Duration) {
	c.mu.Lock()
	c.d += d
	c.mu.Unlock()
}

func (c *durationCounter) get() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d
}

// New returns an Agent that drives rt and img. Call Start, then Apply pod
// updates, then Stop.
func New(rt cri.RuntimeService, img cri.ImageManagerService, opts ...Option) (*Agent, error) {
	if rt == nil || img == nil {
		return nil, errors.New("agent: New: runtime and image services are required")
	}
	cfg := config{mode: ModeSyncPod, clock: clock.RealClock{}, log: zap.NewNop(), scale: 1,
		startParallel: 8, pullParallel: defaultPullParallelism}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.mode.valid(); err != nil {
		return nil, fmt.Errorf("agent: New: %w", err)
	}
	if cfg.probeWorkers < 0 {
		return nil, fmt.Errorf("agent: New: WithTuning: ProbeWorkers %d is negative", cfg.probeWorkers)
	}
	if cfg.probeWorkers == 0 {
		cfg.probeWorkers = defaultProbeWorkers
	}
	if isNilSource(cfg.resources) {
		return nil, errors.New("agent: New: WithNode: Resources is a nil source")
	}
	if cfg.podDir != "" && !filepath.IsAbs(cfg.podDir) {
		return nil, fmt.Errorf("agent: New: WithNode: PodDir %q is not an absolute path", cfg.podDir)
	}
	cfg.startParallel = max(cfg.startParallel, 1)
	cfg.pullParallel = max(cfg.pullParallel, 1)
	if cfg.sampleEvery <= 0 {
		// A second at the kubelet's thresholds (minutes); a tighter
		// threshold is sampled four times per threshold, so that a stall
		// only a few thresholds long is seen.
		threshold := cfg.plegThreshold()
		cfg.sampleEvery = min(defaultHealthSampling, max(threshold/4, time.Millisecond))
	}
	a := &Agent{cfg: cfg, runtime: &runtimeLayer{rt: rt, img: img}, clock: cfg.clock, log: cfg.log,
		expects: map[types.UID]*expectations{}, active: &activity{}}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	m, err := newMetrics(cfg.registerer)
	if err != nil {
		return nil, fmt.Errorf("agent: New: %w", err)
	}
	a.metrics = m
	a.inspector = newInspector(a.runtime)
	cache := newStatusCache()
	a.cache = cache
	crashInitial, crashMax := cfg.scaled(crashLoopInitial), cfg.scaled(crashLoopMax)
	if cfg.crashInitial > 0 {
		crashInitial = cfg.crashInitial
	}
	if cfg.crashMax > 0 {
		crashMax = max(cfg.crashMax, crashInitial)
	}
	a.backoff = newCrashBackoff(a.clock, crashInitial, crashMax)
	a.pods = newPodRecords()
	a.volumes = newVolumeManager(cfg.podDir, a.log)
	a.volumes.useResources(a.ctx, cfg.resources, a.clock, a.wake)
	a.mode = podSyncMode(syncpodMode{a})
	if cfg.mode == ModeBaseline {
		a.mode = baselineMode{a: a, s: baseline.New(a.clock)}
	}
	if cfg.statusHook != nil {
		a.notifier = newStatusNotifier()
	}
	a.syncer = &podSyncer{
		sync: func(ctx context.Context, pod *corev1.Pod) syncResult {
			res := a.mode.sync(ctx, pod)
			a.podStatusChanged(pod.UID) // its waiting reasons may have changed
			return res
		},
		kill:       a.killPod,
		terminated: a.forgetPod,
		orphan: func(ctx context.Context, uid types.UID, grace time.Duration) {
			a.orphans.done(uid, a.removeOrphan(ctx, uid, grace))
		},
		active: a.active,
	}
	if a.workers, err = newPodWorkers(a.syncer, a.clock, cfg.scaled(syncErrorBackoff), a.podFinished); err != nil {
		return nil, fmt.Errorf("agent: New: %w", err)
	}
	a.prober = newProber(a.runProbe, a.clock, a.log, cfg.probeWorkers, a.active, a.emit, a.wake, a.podStatusChanged)

	observePull := func(image string, d time.Duration, err error) {
		a.metrics.observePull(d, err)
		a.emit(Event{Type: eventPulled, Image: image, Duration: d, Err: err})
	}
	observeRelist := func(d time.Duration, err error) { a.metrics.relist.Observe(d.Seconds()) }
	if cfg.mode == ModeBaseline {
		threshold := cfg.plegThreshold()
		period := cfg.scaled(relistPeriod)
		a.images = &blockingPuller{runtime: a.runtime, clock: a.clock, obs: observePull, auth: a.volumes.pullAuth}
		a.relister = newRelister(a.runtime, a.clock, a.log, a.inspector, func() time.Duration { return period },
			threshold, a.cache, a.wakeAndReport, observeRelist)
		a.relister.active = a.active
		a.source = a.relister
		cache.trackReads(a.active) // workers park in GetNewerThan until a relist
	} else {
		images, err := newImageGate(a.runtime.imageService(), a.clock, a.log, cfg, a.active, a.wake, observePull, a.volumes.pullAuth)
		if err != nil {
			return nil, fmt.Errorf("agent: New: %w", err)
		}
		a.images = images
		a.admission = cfg.admission
		if !cfg.admissionSet {
			ctl, err := newStartAdmission(a.clock, a.log)
			if err != nil {
				a.images.close()
				return nil, fmt.Errorf("agent: New: %w", err)
			}
			a.admission, a.ownAdmission = ctl, true
		}
		l, err := newEventedLifecycle(a)
		if err != nil {
			a.images.close()
			return nil, fmt.Errorf("agent: New: %w", err)
		}
		a.lifecycle, a.source = l, l
	}
	return a, nil
}

// Mode reports the agent's mode.
func (a *Agent) Mode() Mode { return a.cfg.mode }

// Start starts the PLEG and the health sampler. Pod workers start with
// their first update.
func (a *Agent) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return ErrStopped
	}
	if a.started {
		return nil
	}
	a.started = true
	a.prober.start()
	a.source.start()
	if a.notifier != nil {
		a.wg.Go(func() { a.runStatusNotifier(a.ctx) })
	}
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		a.source.run(a.ctx)
	}()
	a.wg.Go(func() { a.checkRuntime(a.ctx) })
	go func() {
		defer a.wg.Done()
		a.sampleHealth()
	}()
	return nil
}

// Apply hands a desired-state change to the pod's worker.
func (a *Agent) Apply(u PodUpdate) {
	switch u.Op {
	case OpAdd, OpUpdate:
		pod := u.Pod
		if pod.UID == "" {
			pod = pod.DeepCopy()
			pod.UID = StaticPodUID(pod)
		}
		a.pods.desire(pod, a.clock.Now(), u.Op == OpAdd)
		a.emit(Event{Type: u.Op.String(), Pod: podKey(pod)})
		a.images.prefetch(a.ctx, pod, a.podSandboxConfig(pod, 0))
		a.updatePod(pod, u.Op)
		a.podStatusChanged(pod.UID)
	case OpDelete:
		uid := u.UID
		if uid == "" && u.Pod != nil {
			uid = u.Pod.UID
			if uid == "" {
				uid = StaticPodUID(u.Pod)
			}
		}
		a.pods.terminating(uid)
		a.prober.podTerminating(uid)
		if u.Pod != nil && u.Pod.DeletionTimestamp != nil {
			a.pods.update(uid, func(rec *podRecord) { rec.deleting = u.Pod })
		}
		if u.Pod != nil {
			a.emit(Event{Type: eventDeleted, Pod: podKey(u.Pod)})
		}
		var grace *int64
		if u.Pod != nil {
			grace = u.Pod.DeletionGracePeriodSeconds
		}
		a.killPodWorker(uid, grace)
	}
}

// Stop stops every worker (cancelling running syncs and pulls), the PLEG
// and the sampler, and waits for all of them. Pods stay on the runtime;
// call Cleanup to remove them. Stop is idempotent and safe to call
// concurrently: every call returns only once everything has stopped.
func (a *Agent) Stop() {
	a.stopOnce.Do(func() {
		a.mu.Lock()
		a.stopped = true
		a.mu.Unlock()
		_ = a.workers.Close()
		a.cancel()
		a.wg.Wait()
		a.prober.close()
		a.images.close()
		if a.ownAdmission {
			_ = a.admission.Close()
		}
	})
}

func (a *Agent) removeSandbox(ctx context.Context, id string) error {
	cs, err := a.runtime.sandboxContainers(ctx, id, nil)
	if err != nil {
		return fmt.Errorf("agent: remove sandbox %s: ListContainers: %w", id, err)
	}
	var errs []error
	for _, c := range cs {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			if err := a.runtime.stopContainer(ctx, c.Id, 0); err != nil {
				errs = append(errs, fmt.Errorf("StopContainer %s: %w", c.Id, err))
			}
		}
		if err := a.runtime.removeContainer(ctx, c.Id); err != nil {
			errs = append(errs, fmt.Errorf("RemoveContainer %s: %w", c.Id, err))
		}
		a.inspector.forget(c.Id)
	}
	if err := a.runtime.stopPodSandbox(ctx, id); err != nil {
		errs = append(errs, fmt.Errorf("StopPodSandbox %s: %w", id, err))
	}
	if err := a.runtime.removePodSandbox(ctx, id); err != nil {
		errs = append(errs, fmt.Errorf("RemovePodSandbox %s: %w", id, err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("agent: remove sandbox %s: %w", id, err)
	}
	return nil
}

// killPod is the worker's termination: remove everything the pod has,
// its containers stopped within grace.
func (a *Agent) killPod(ctx context.Context, pod *corev1.Pod, grace time.Duration) error {
	a.images.forget(pod.UID)
	a.forgetAdmission(pod)
	// A pod re-added while it is killed starts from nothing.
	a.expectationsFor(pod.UID).reset()
	a.backoff.forgetPrefix(string(pod.UID) + "/")
	sbs, err := a.runtime.sandboxes(ctx, map[string]string{labelPodUID: string(pod.UID)})
	if err != nil {
		a.log.Warn("kill pod: list sandboxes", zap.String("pod", podKey(pod)), zap.Error(err))
		return err
	}
	var errs []error
	for _, sb := range sbs {
		// A failed graceful stop still removes the pod: removeSandbox
		// kills what did not stop.
		if err := a.stopContainersGracefully(ctx, pod, a.capGrace(grace), sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("stop pod %s: %w", podKey(pod), err))
		}
	}
	if a.notifier != nil && ctx.Err() == nil {
		// Read before the containers go: their exit codes make the phase.
		if final, ok := a.finalStatus(ctx, pod.UID, sbs); ok {
			a.notifier.enqueue(pod.UID, final)
		}
	}
	for _, sb := range sbs {
		if err := a.removeSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 { // the sandboxes are gone: so go the volumes
		if err := a.volumes.tearDown(pod.UID); err != nil {
			errs = append(errs, err)
		}
	}
	err = errors.Join(errs...)
	if err != nil && ctx.Err() == nil {
		a.log.Warn("kill pod", zap.String("pod", podKey(pod)), zap.Error(err))
	}
	a.emit(Event{Type: eventKilled, Pod: podKey(pod), Err: err})
	return err
}

// forgetPod drops every per-pod entry once its pod terminated, so churn
// leaves nothing behind.
func (a *Agent) forgetPod(uid types.UID) {
	a.cache.Delete(uid)
	a.backoff.forgetPrefix(string(uid) + "/")
	a.prober.forget(uid)
	a.pods.remove(uid)
	a.mode.forget(uid)
	a.volumes.forget(uid)
	a.mu.Lock()
	delete(a.expects, uid)
	a.mu.Unlock()
}

func (a *Agent) emit(e Event) {
	if ce := a.log.Check(zap.DebugLevel, string(e.Type)); ce != nil {
		ce.Write(zap.String("pod", e.Pod), zap.String("container", e.Container), zap.String("image", e.Image),
			zap.Uint32("attempt", e.Attempt), zap.Duration("duration", e.Duration), zap.Error(e.Err))
	}
	if a.cfg.hook != nil {
		e.Time = a.clock.Now()
		a.cfg.hook(e)
	}
}

func (a *Agent) plegHealth() (bool, error, string) { return a.source.health() }

// sampleHealth integrates the time PLEG reports unhealthy, after the first
// successful relist (startup is not a failure).
func (a *Agent) sampleHealth() {
	t := a.clock.NewTicker(a.cfg.sampleEvery)
	defer t.Stop()
	last := a.clock.Now()
	seenHealthy := false
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C():
		}
		now := a.clock.Now()
		ok, err, mode := a.plegHealth()
		if ok {
			seenHealthy = true
		} else if seenHealthy {
			a.unhealthy.add(now.Sub(last))
		}
		last = now
		a.healthStatus.mu.Lock()
		changed := a.healthStatus.healthy != ok && seenHealthy
		a.healthStatus.healthy, a.healthStatus.err, a.healthStatus.mode = ok, err, mode
		a.healthStatus.mu.Unlock()
		a.metrics.setHealth(ok)
		if changed {
			a.emit(Event{Type: eventHealth, Healthy: ok, Err: err})
		}
	}
}

func (a *Agent) expectationsFor(uid types.UID) *expectations {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.expects[uid]
	if !ok {
		e = &expectations{}
		a.expects[uid] = e
	}
	return e
}

// quiescent reports whether the agent has no work in hand: no pod worker
// wake pending or being handled, no relist due or running, no PLEG event
// on its way to a worker, no image inspection or pull a pod waits on.
// What it waits for then is its clock or the runtime. With a fake clock, a
// test steps time only when this holds, so time never passes under work
// that would have reacted sooner. The pleg package's own goroutines and
// the runtime are not covered.
func (a *Agent) quiescent() bool {
	return a.syncer.idle(a.workers) && a.images.inFlight() == 0 && a.source.drained()
}

func (a *Agent) maxRelist() time.Duration {
	return a.source.longestRelist()
}
