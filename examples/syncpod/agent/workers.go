package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/podworkers"
)

// syncResult is what one sync tells its worker: when to sync again if
// nothing else wakes it (0: only on a wake), and whether it failed (the
// pod is then synced again after podworkers' back-off).
type syncResult struct {
	requeueAfter time.Duration
	err          error
}

// podSyncer is the agent's podworkers.Syncer, the kubelet's podSyncer:
// SyncPod is the mode's sync, SyncTerminatingPod kills the pod,
// SyncTerminatedPod drops its per-pod entries, SyncTerminatingRuntimePod
// removes an orphan RemoveOrphans found. Each call counts in active while
// it runs (a sync parked in the status cache gives its count back, see
// trackedStore), and in inSync, so that idle can tell a call parked there
// from one podworkers is handing over.
type podSyncer struct {
	sync       func(ctx context.Context, pod *corev1.Pod) syncResult
	kill       func(ctx context.Context, pod *corev1.Pod, grace time.Duration) error // one attempt; it logs its errors
	terminated func(uid types.UID)
	orphan     func(ctx context.Context, uid types.UID, grace time.Duration)

	mu     sync.Mutex // held across each count change and idle's reads
	active *activity
	inSync int
	failed map[types.UID]struct{} // pods whose last SyncPod failed
}

var _ podworkers.Syncer = (*podSyncer)(nil)

func (s *podSyncer) enter() {
	s.mu.Lock()
	s.inSync++
	s.active.add(1)
	s.mu.Unlock()
}

func (s *podSyncer) exit() {
	s.mu.Lock()
	s.inSync--
	s.active.add(-1)
	s.mu.Unlock()
}

// idle reports that the agent's activity is zero and that the pod workers
// have nothing in hand: no pod queued, and every call running (which
// podworkers counts from before the call until its next timer is armed)
// one inside the Syncer and parked in the status cache. The reads are one
// step against every enter and exit, and active is read before the
// workers' Stats, so a wake handed over by a counted goroutine is seen.
func (s *podSyncer) idle(w *podworkers.Workers) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active.idle() {
		return false
	}
	st := w.Stats()
	return st.Queued == 0 && st.Running == s.inSync
}

// SyncPod implements podworkers.Syncer.
func (s *podSyncer) SyncPod(ctx context.Context, _ podworkers.UpdateType, pod *corev1.Pod) (podworkers.Result, error) {
	s.enter()
	defer s.exit()
	res := s.sync(ctx, pod)
	s.mu.Lock()
	if res.err != nil {
		if s.failed == nil {
			s.failed = map[types.UID]struct{}{}
		}
		s.failed[pod.UID] = struct{}{}
	} else {
		delete(s.failed, pod.UID)
	}
	s.mu.Unlock()
	return podworkers.Result{RequeueAfter: res.requeueAfter}, res.err
}

// failedPods are the pods whose last SyncPod failed: each waits out its
// back-off unless woken.
func (s *podSyncer) failedPods() []types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]types.UID, 0, len(s.failed))
	for uid := range s.failed {
		out = append(out, uid)
	}
	return out
}

// SyncTerminatingPod implements podworkers.Syncer: one attempt at removing
// everything the pod has (kill logs its errors; what it left is removed by
// RemoveOrphans or Cleanup), so a kill never waits on a broken runtime.
func (s *podSyncer) SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, grace time.Duration) error {
	s.enter()
	defer s.exit()
	_ = s.kill(ctx, pod, grace)
	return nil
}

// SyncTerminatedPod implements podworkers.Syncer: the pod's per-pod
// entries go.
func (s *podSyncer) SyncTerminatedPod(_ context.Context, pod *corev1.Pod) error {
	s.enter()
	defer s.exit()
	s.terminated(pod.UID)
	s.mu.Lock()
	delete(s.failed, pod.UID)
	s.mu.Unlock()
	return nil
}

// SyncTerminatingRuntimePod implements podworkers.Syncer: one attempt at
// removing an orphan (orphan hands its outcome to the RemoveOrphans
// waiting).
func (s *podSyncer) SyncTerminatingRuntimePod(ctx context.Context, rp podworkers.RuntimePod, grace time.Duration) error {
	s.enter()
	defer s.exit()
	s.orphan(ctx, rp.UID, grace)
	return nil
}

// newPodWorkers returns the library's pod workers over s: errors retried
// after backOff, no resync of their own (each sync asks for its requeue),
// and finished called, from the worker, for each pod that finished.
func newPodWorkers(s *podSyncer, clk clock.WithDelayedExecution, backOff time.Duration, finished func(types.UID)) (*podworkers.Workers, error) {
	return podworkers.New(s,
		podworkers.WithClock(clk),
		podworkers.WithBackOff(backOff, backOff),
		podworkers.WithResyncInterval(0),
		podworkers.WithMaxParallel(0), // a pod's sync waits on its runtime calls, not on a CPU
		podworkers.WithObserver(func(e podworkers.Event) {
			if e.Kind == podworkers.EventFinished {
				finished(e.UID)
			}
		}))
}

// podFinished hands a finished pod to afterFinish, counted in active
// until afterFinish is done.
func (a *Agent) podFinished(uid types.UID) {
	a.active.add(1)
	a.wg.Go(func() { a.afterFinish(uid) })
}

// afterFinish is the kubelet's SyncKnownPods for one pod: the finished
// record is forgotten, and a pod added again while it was terminating
// starts a new life.
func (a *Agent) afterFinish(uid types.UID) {
	defer a.active.add(-1)
	_ = a.workers.Forget(uid) // ErrNotFinished: a new life began already
	if pod := a.readds.take(uid); pod != nil {
		a.Apply(PodUpdate{Op: OpAdd, Pod: pod})
	}
}

// updatePod hands pod to its worker. A pod added again while its worker
// terminates it waits until the termination finished (afterFinish), as
// the kubelet's pod workers hold a restarted static pod.
func (a *Agent) updatePod(pod *corev1.Pod, op Op) {
	typ := podworkers.UpdateUpdate
	if op == OpAdd {
		typ = podworkers.UpdateCreate
	}
	u := podworkers.PodUpdate{Type: typ, Pod: pod}
	switch a.workers.Phase(pod.UID) {
	case podworkers.PhaseTerminating, podworkers.PhaseTerminated:
		a.readds.put(pod)
		// It may have finished meanwhile, before afterFinish looked.
		if p := a.workers.Phase(pod.UID); p != podworkers.PhaseFinished && p != podworkers.PhaseUnknown {
			return
		}
		if a.readds.take(pod.UID) == nil {
			return // afterFinish took it
		}
	}
	err := a.workers.Update(u)
	if errors.Is(err, podworkers.ErrFinished) {
		_ = a.workers.Forget(pod.UID)
		err = a.workers.Update(u)
	}
	if err != nil && !errors.Is(err, podworkers.ErrClosed) {
		a.log.Warn("pod update refused: " + err.Error())
	}
}

// killPodWorker asks uid's worker to terminate the pod, with the
// deletion's grace period if it has one. A UID the workers do not run is
// ignored; a pod waiting to be added again is not.
func (a *Agent) killPodWorker(uid types.UID, deletionGrace *int64) {
	a.readds.take(uid)
	switch a.workers.Phase(uid) {
	case podworkers.PhaseUnknown, podworkers.PhaseFinished:
		return
	}
	u := podworkers.PodUpdate{Type: podworkers.UpdateKill, RuntimePod: &podworkers.RuntimePod{UID: uid}}
	if deletionGrace != nil {
		g := time.Duration(max(*deletionGrace, 0)) * time.Second
		u.GracePeriod = &g
	}
	if err := a.workers.Update(u); err != nil && !errors.Is(err, podworkers.ErrClosed) {
		a.log.Warn("pod kill refused: " + err.Error())
	}
}

// wake asks uid's worker for another sync (a PLEG event, a finished pull,
// a probe result).
func (a *Agent) wake(uid types.UID) { a.workers.Wake(uid) }

// known reports whether uid has a worker that has not finished: a pod
// asked for, or one being killed.
func (a *Agent) known(uid types.UID) bool {
	switch a.workers.Phase(uid) {
	case podworkers.PhaseUnknown, podworkers.PhaseFinished:
		return false
	}
	return true
}

// liveWorkers is the number of pods with a worker that has not finished;
// none once the agent stopped.
func (a *Agent) liveWorkers() int {
	a.mu.Lock()
	stopped := a.stopped
	a.mu.Unlock()
	if stopped {
		return 0
	}
	st := a.workers.Stats()
	return st.Pods - st.Finished
}

// readdSet holds the pods added again while their worker terminated them.
type readdSet struct {
	mu   sync.Mutex
	pods map[types.UID]*corev1.Pod
}

func (r *readdSet) put(pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pods == nil {
		r.pods = map[types.UID]*corev1.Pod{}
	}
	r.pods[pod.UID] = pod
}

func (r *readdSet) take(uid types.UID) *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[uid]
	delete(r.pods, uid)
	return p
}

func (r *readdSet) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pods)
}
