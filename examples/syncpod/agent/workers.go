package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// syncResult is what one sync tells its worker: when to sync again if
// nothing else wakes it (0: only on a wake), and whether it failed.
type syncResult struct {
	requeueAfter time.Duration
	err          error
}

// syncFunc reconciles one pod towards its desired state. ctx is cancelled
// when the pod is deleted or the agent stops.
type syncFunc func(ctx context.Context, pod *corev1.Pod) syncResult

// killFunc stops and removes everything the pod has on the runtime.
type killFunc func(ctx context.Context, pod *corev1.Pod) error

// podWorkers runs one goroutine per pod, like the kubelet's podWorkers:
// updates are coalesced (the last desired state wins), a 1-slot channel
// signals the worker, and deleting a pod cancels its running sync.
type podWorkers struct {
	clock      clock.WithTickerAndDelayedExecution
	sync       syncFunc
	kill       killFunc
	errBackoff time.Duration
	onExit     func(uid types.UID) // called when a worker is gone (outside locks)
	active     *activity           // counts pending and running wakes

	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	stopped bool
}

type podWorker struct {
	uid    types.UID
	signal chan struct{} // capacity 1: a pending wake is never lost, never doubled
	active *activity     // one count per pending signal, until it is handled
	gone   atomic.Bool   // the worker exited: a wake is dropped, not left pending

	mu          sync.Mutex
	desired     *corev1.Pod
	terminating bool
	readd       *corev1.Pod // pod re-added while terminating: run it after the kill
	cancelSync  context.CancelFunc
	timer       clock.Timer
}

func newPodWorkers(clk clock.WithTickerAndDelayedExecution, sync syncFunc, kill killFunc, errBackoff time.Duration) *podWorkers {
	ctx, cancel := context.WithCancel(context.Background())
	return &podWorkers{
		clock:      clk,
		sync:       sync,
		kill:       kill,
		errBackoff: errBackoff,
		ctx:        ctx,
		cancel:     cancel,
		workers:    map[types.UID]*podWorker{},
		active:     &activity{},
	}
}

func (w *podWorker) wake() {
	if w.gone.Load() {
		return
	}
	w.active.add(1) // before the send: the worker may handle it at once
	select {
	case w.signal <- struct{}{}:
	default:
		w.active.add(-1) // one is pending already
	}
	if w.gone.Load() {
		w.drain() // the worker exited meanwhile, maybe before it drained
	}
}

// drain drops a pending wake nobody will handle.
func (w *podWorker) drain() {
	select {
	case <-w.signal:
		w.active.add(-1)
	default:
	}
}

// UpdatePod records pod as the desired state of its worker (starting the
// worker if needed) and wakes it. It never blocks on a running sync.
func (p *podWorkers) UpdatePod(pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	w, ok := p.workers[pod.UID]
	if !ok {
		w = &podWorker{uid: pod.UID, signal: make(chan struct{}, 1), desired: pod, active: p.active}
		p.workers[pod.UID] = w
		p.wg.Add(1)
		go p.run(w)
	}
	w.mu.Lock()
	if w.terminating {
		w.readd = pod
	} else {
		w.desired = pod
	}
	w.mu.Unlock()
	w.wake()
}

// KillPod asks the pod's worker to cancel its running sync, remove the pod
// from the runtime and exit. Unknown pods are ignored.
func (p *podWorkers) KillPod(uid types.UID, deletionGrace *int64) {
	p.mu.Lock()
	w, ok := p.workers[uid]
	p.mu.Unlock()
	if !ok {
		return
	}
	w.mu.Lock()
	if deletionGrace != nil && w.desired != nil {
		// The kill uses the deletion's grace period (a copy: the pod
		// may be shared with the caller).
		d := w.desired.DeepCopy()
		d.DeletionGracePeriodSeconds = deletionGrace
		w.desired = d
	}
	w.terminating = true
	w.readd = nil
	if w.cancelSync != nil {
		w.cancelSync()
	}
	w.mu.Unlock()
	w.wake()
}

// Wake asks the pod's worker for another sync (PLEG event, finished pull).
func (p *podWorkers) Wake(uid types.UID) {
	p.mu.Lock()
	w, ok := p.workers[uid]
	p.mu.Unlock()
	if ok {
		w.wake()
	}
}

// Len is the number of live workers.
// Known reports whether uid has a worker: a pod asked for, or one being
// killed.
func (p *podWorkers) Known(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.workers[uid]
	return ok
}

func (p *podWorkers) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.workers)
}

// Stop cancels every running sync and waits for all workers to return.
// It is idempotent.
func (p *podWorkers) Stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

func (p *podWorkers) run(w *podWorker) {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			w.mu.Lock()
			if w.timer != nil {
				w.timer.Stop()
			}
			w.mu.Unlock()
			p.mu.Lock()
			delete(p.workers, w.uid)
			p.mu.Unlock()
			select {
			case <-w.signal: // never handled now
				p.active.add(-1)
			default:
			}
			return
		case <-w.signal:
		}
		exit := p.handle(w)
		p.active.add(-1) // after the next timer is armed
		if exit {
			// A wake that came during the termination (a runtime event,
			// a probe result) is never handled now.
			w.gone.Store(true)
			w.drain()
			return
		}
	}
}

// handle runs one sync or the termination of w; exit reports that the
// worker is gone.
func (p *podWorkers) handle(w *podWorker) (exit bool) {
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	pod, terminating := w.desired, w.terminating
	ctx, cancel := context.WithCancel(p.ctx)
	w.cancelSync = cancel
	w.mu.Unlock()

	if terminating {
		cancel()
		_ = p.kill(p.ctx, pod) // errors are logged by kill; the runtime is re-listed on start
		return p.finishTermination(w)
	}

	res := p.sync(ctx, pod)
	cancel()
	d := res.requeueAfter
	if res.err != nil && p.ctx.Err() == nil {
		d = p.errBackoff
	}
	w.mu.Lock()
	w.cancelSync = nil
	if d > 0 && !w.terminating {
		w.timer = p.clock.AfterFunc(d, w.wake)
	}
	w.mu.Unlock()
	return false
}

// finishTermination removes the worker, unless the pod was re-added while
// it was being killed; then the worker carries on with the new pod.
func (p *podWorkers) finishTermination(w *podWorker) (exit bool) {
	p.mu.Lock()
	w.mu.Lock()
	w.cancelSync = nil
	if w.readd != nil && !p.stopped {
		w.desired, w.readd, w.terminating = w.readd, nil, false
		w.mu.Unlock()
		p.mu.Unlock()
		w.wake()
		return false
	}
	delete(p.workers, w.uid)
	w.mu.Unlock()
	p.mu.Unlock()
	if p.onExit != nil {
		p.onExit(w.uid)
	}
	return true
}
