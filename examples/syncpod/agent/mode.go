package agent

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/examples/syncpod/agent/baseline"
)

// podSyncMode is a mode's SyncPod, chosen once in New: syncpod mode (the
// agent's own, sync_syncpod.go) or baseline mode (package baseline).
type podSyncMode interface {
	sync(ctx context.Context, pod *corev1.Pod) syncResult
	forget(uid types.UID) // the pod terminated
	len() int             // pods the mode keeps something of
}

// syncpodMode is ModeSyncPod: its per-pod state is the agent's expectations.
type syncpodMode struct{ a *Agent }

func (m syncpodMode) sync(ctx context.Context, pod *corev1.Pod) syncResult {
	return m.a.syncSyncPod(ctx, pod)
}
func (syncpodMode) forget(types.UID) {}
func (syncpodMode) len() int         { return 0 }

// baselineMode is ModeBaseline: package baseline orders the sync, a
// baselinePod carries out each step.
type baselineMode struct {
	a *Agent
	s *baseline.Syncer
}

func (m baselineMode) sync(ctx context.Context, pod *corev1.Pod) syncResult {
	d, err := m.s.Sync(ctx, pod.UID, &baselinePod{a: m.a, pod: pod})
	return syncResult{requeueAfter: d, err: err}
}
func (m baselineMode) forget(uid types.UID) { m.s.Forget(uid) }
func (m baselineMode) len() int             { return m.s.Len() }

// baselinePod is one baseline sync of pod, its steps carried out by the
// agent's runtime layer.
type baselinePod struct {
	a         *Agent
	pod       *corev1.Pod
	st        *runtimePodStatus
	acts      *podActions
	sbAttempt uint32
	sandboxID string
	sandbox   *runtimeapi.PodSandboxConfig // built once per sync, for every pull
}

var _ baseline.Pod = (*baselinePod)(nil)

func (p *baselinePod) WaitStatus(ctx context.Context, since time.Time) error {
	t0 := p.a.clock.Now()
	st, err := p.a.cache.GetNewerThan(ctx, p.pod.UID, since)
	p.a.blocked.add(p.a.clock.Since(t0))
	if st == nil {
		st = &runtimePodStatus{UID: p.pod.UID}
		st.index()
	}
	p.st = st
	return err
}

func (p *baselinePod) Plan(ctx context.Context) (baseline.Plan, bool, error) {
	acts, sbAttempt, early, done := p.a.beginSync(ctx, p.pod, p.st, false)
	if done {
		return baseline.Plan{}, true, early.err
	}
	p.acts, p.sbAttempt, p.sandboxID = acts, sbAttempt, p.st.SandboxID
	p.a.volumes.setUp(p.pod)
	p.sandbox = p.a.podSandboxConfig(p.pod, sbAttempt)
	return baseline.Plan{CreateSandbox: acts.createSandbox, Init: len(acts.initSteps), Start: len(acts.start)}, false, nil
}

func (p *baselinePod) CreateSandbox(ctx context.Context) error {
	id, err := p.a.runSandbox(ctx, p.pod, p.st, p.acts)
	if err == nil {
		p.sandboxID = id
	}
	return err
}

func (p *baselinePod) Kill(ctx context.Context) error {
	var errs []error
	for _, k := range p.acts.kill {
		if err := p.a.killContainer(ctx, p.pod, k); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *baselinePod) step(s baseline.Step) containerStart {
	if s.Init {
		return p.acts.initSteps[s.Index]
	}
	return p.acts.start[s.Index]
}

func (p *baselinePod) Pull(ctx context.Context, s baseline.Step) error {
	image := p.step(s).spec.Image
	t := p.a.clock.Now()
	_, err := p.a.images.ensure(ctx, p.pod.UID, image, 0, p.sandbox)
	d := p.a.clock.Since(t)
	p.a.blocked.add(d)
	p.a.pods.addPullWait(p.pod.UID, d)
	p.a.recordPull(p.pod, image, err == nil, err)
	return err
}

func (p *baselinePod) Start(ctx context.Context, s baseline.Step) error {
	step := p.step(s)
	if err := p.a.startContainer(ctx, p.pod, p.sandboxID, p.sbAttempt, step); err != nil {
		p.a.emit(Event{Type: eventStartError, Pod: podKey(p.pod), Container: step.spec.Name, Err: err})
		return err
	}
	return nil
}

func (p *baselinePod) Done(ctx context.Context, err error) time.Duration {
	requeue := p.a.cfg.scaled(resyncPeriod)
	if p.acts.backoffWait > 0 && p.acts.backoffWait < requeue {
		requeue = p.acts.backoffWait
	}
	if err != nil {
		p.a.pods.setMessage(p.pod.UID, err.Error())
		if ctx.Err() == nil {
			p.a.log.Info("sync failed", zap.String("pod", podKey(p.pod)), zap.Error(err))
		}
	}
	p.a.emit(Event{Type: eventSynced, Pod: podKey(p.pod), Err: err})
	return requeue
}
