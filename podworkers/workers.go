package podworkers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/backoff"
	"github.com/syncpod/syncpod/internal/typednil"
)

// Workers runs a Syncer for each pod it is given. Use New; a zero Workers
// answers every method with an *ArgError (Wake false, Phase PhaseUnknown,
// zero Stats, Close nil). Its methods are safe for concurrent use, from any
// goroutine and from inside a Syncer call, except Close, which waits for
// the Syncer calls and so must not be called from one.
type Workers struct {
	syncer  Syncer
	cfg     config
	baseCtx context.Context // cancelled by Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once

	mu       sync.Mutex
	pods     map[types.UID]*podState
	queue    []*podState // ready pods, first in first out, from head
	head     int
	backoff  *backoff.Keyed[types.UID]
	active   int // goroutines alive
	busy     int // of which in a Syncer call
	settling int // calls returned whose timer or events are not yet done
	closed   bool
	calls    uint64
	failures uint64
}

// podState is one pod's record; every field is guarded by Workers.mu.
type podState struct {
	uid     types.UID
	pod     *corev1.Pod
	runtime RuntimePod
	orphan  bool
	phase   Phase
	grace   time.Duration // of the termination, once terminating
	synced  bool          // SyncPod ran once: later calls are not UpdateCreate
	reason  UpdateType    // of the next SyncPod (0: UpdateSync)
	queued  bool
	running bool
	again   bool // updated or woken while running: queue it when the call returns
	cancel  context.CancelFunc
	timer   clock.Timer
	seq     uint64 // bumped whenever the armed timer becomes stale
}

// New returns Workers that call syncer. A nil or typed-nil syncer, and a bad
// option value, is refused with a *ConfigError.
func New(syncer Syncer, opts ...Option) (*Workers, error) {
	if typednil.Is(syncer) {
		return nil, &ConfigError{Option: "syncer", Reason: "must not be nil"}
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Workers{
		syncer:  syncer,
		cfg:     cfg,
		baseCtx: ctx,
		cancel:  cancel,
		pods:    map[types.UID]*podState{},
		backoff: backoff.NewKeyed[types.UID](backoff.Policy{Initial: cfg.backOffInit, Max: cfg.backOffMax}),
	}, nil
}

// Update records u and schedules a call for its pod; it never waits for a
// running call. A pod a kill or a terminal phase sent to terminating stays
// there: later non-kill updates only replace the pod object that the
// termination phases receive. A finished pod is not started again: Update
// returns ErrFinished (a kill is a no-op) until Forget drops the UID, after
// which the UID starts a new life, as a new pod. Bad input is an *ArgError;
// after Close, ErrClosed.
func (w *Workers) Update(u PodUpdate) error {
	if w.syncer == nil {
		return errNotNew("Update")
	}
	uid, err := checkUpdate(u)
	if err != nil {
		return err
	}
	var evs []Event
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	ps := w.pods[uid]
	if ps == nil {
		ps = &podState{uid: uid, phase: PhaseSyncing}
		if u.Pod == nil {
			ps.orphan, ps.runtime = true, *u.RuntimePod
		}
		w.pods[uid] = ps
	}
	if ps.phase == PhaseFinished {
		w.mu.Unlock()
		if u.Type == UpdateKill {
			return nil
		}
		return fmt.Errorf("%w: %s", ErrFinished, uid)
	}
	if u.Pod != nil {
		ps.pod = u.Pod
	}
	if u.Type == UpdateKill {
		g := DefaultGracePeriod
		switch {
		case u.GracePeriod != nil:
			g = *u.GracePeriod
		case ps.pod != nil:
			g = podGrace(ps.pod)
		}
		switch ps.phase {
		case PhaseSyncing:
			ps.phase, ps.grace = PhaseTerminating, g
			evs = append(evs, Event{Kind: EventTerminating, UID: uid, Orphan: ps.orphan})
			if ps.running && ps.cancel != nil {
				ps.cancel()
			}
		case PhaseTerminating:
			if g < ps.grace {
				ps.grace = g
				if ps.running && ps.cancel != nil {
					ps.cancel() // made again with the shorter grace period
				}
			}
		}
	} else if ps.phase == PhaseSyncing && u.Type.rank() > ps.reason.rank() {
		ps.reason = u.Type
	}
	stop := w.enqueueLocked(ps)
	w.mu.Unlock()
	if stop != nil {
		stop.Stop()
	}
	w.emit(evs)
	return nil
}

func checkUpdate(u PodUpdate) (types.UID, error) {
	arg := func(name, reason string) error { return &ArgError{Method: "Update", Arg: name, Reason: reason} }
	switch u.Type {
	case UpdateCreate, UpdateUpdate, UpdateSync:
		switch {
		case u.Pod == nil:
			return "", arg("Pod", "must not be nil")
		case u.RuntimePod != nil:
			return "", arg("RuntimePod", "is only for UpdateKill")
		case u.GracePeriod != nil:
			return "", arg("GracePeriod", "is only for UpdateKill")
		}
	case UpdateKill:
		switch {
		case u.Pod == nil && u.RuntimePod == nil:
			return "", arg("Pod", "must not be nil (or set RuntimePod for an orphan)")
		case u.Pod != nil && u.RuntimePod != nil:
			return "", arg("RuntimePod", "must be nil when Pod is set")
		case u.GracePeriod != nil && *u.GracePeriod < 0:
			return "", arg("GracePeriod", fmt.Sprintf("%v is negative", *u.GracePeriod))
		}
	default:
		return "", arg("Type", fmt.Sprintf("%d is not an UpdateType", int(u.Type)))
	}
	uid := types.UID("")
	if u.Pod != nil {
		uid = u.Pod.UID
	} else {
		uid = u.RuntimePod.UID
	}
	if uid == "" {
		return "", arg("UID", "must not be empty")
	}
	return uid, nil
}

// Wake schedules a call of the pod soon (when a goroutine is free), even
// if it is backing off: what the PLEG and the image puller call when
// something about the pod changed. Wakes coalesce with each other and with
// updates; a wake during a call makes one more call after it. Wake never
// blocks on a call, may be called from a Syncer, and reports whether it
// scheduled anything: it is a no-op (false) for a UID no Update made known,
// a finished pod, a zero Workers and after Close.
func (w *Workers) Wake(uid types.UID) bool {
	if w.syncer == nil {
		return false
	}
	w.mu.Lock()
	ps := w.pods[uid]
	if w.closed || ps == nil || ps.phase == PhaseFinished {
		w.mu.Unlock()
		return false
	}
	stop := w.enqueueLocked(ps)
	w.mu.Unlock()
	if stop != nil {
		stop.Stop()
	}
	return true
}

// Forget drops the record of a finished pod, so that its UID can be used
// again; call it when the pod is gone from the configuration (the
// kubelet's SyncKnownPods). An unknown UID is a no-op; a pod that has not
// finished is refused with ErrNotFinished. After Close, ErrClosed.
func (w *Workers) Forget(uid types.UID) error {
	if w.syncer == nil {
		return errNotNew("Forget")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	ps := w.pods[uid]
	switch {
	case ps == nil:
		return nil
	case ps.phase != PhaseFinished:
		return fmt.Errorf("%w: %s is %v", ErrNotFinished, uid, ps.phase)
	}
	delete(w.pods, uid)
	return nil
}

// Phase returns where the pod is in its life (PhaseUnknown for a UID no
// Update made known). After Close it is the phase the pod had then.
func (w *Workers) Phase(uid types.UID) Phase {
	if w.syncer == nil {
		return PhaseUnknown
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ps := w.pods[uid]; ps != nil {
		return ps.phase
	}
	return PhaseUnknown
}

// Stats returns a consistent snapshot of the pods and goroutines.
func (w *Workers) Stats() Stats {
	if w.syncer == nil {
		return Stats{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Stats{Pods: len(w.pods), Queued: len(w.queue) - w.head, Running: w.busy + w.settling,
		Goroutines: w.active, Calls: w.calls, Failures: w.failures}
	for _, ps := range w.pods {
		switch ps.phase {
		case PhaseTerminating, PhaseTerminated:
			s.Terminating++
		case PhaseFinished:
			s.Finished++
		}
	}
	return s
}

// Close stops accepting work, cancels the context of every running call,
// drops the pending ones and waits for every goroutine the Workers started.
// It is idempotent and returns nil.
func (w *Workers) Close() error {
	if w.syncer == nil {
		return nil
	}
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		var timers []clock.Timer
		for _, ps := range w.pods {
			if t := w.disarmLocked(ps); t != nil {
				timers = append(timers, t)
			}
			ps.queued = false
		}
		clear(w.queue)
		w.queue, w.head = nil, 0
		w.mu.Unlock()
		w.cancel()
		for _, t := range timers {
			t.Stop()
		}
		w.wg.Wait()
	})
	return nil
}

func (w *Workers) emit(evs []Event) {
	if w.cfg.observer == nil {
		return
	}
	for _, e := range evs {
		w.cfg.observer(e)
	}
}

// podGrace is the grace period of a kill that does not set one.
func podGrace(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return seconds(*pod.DeletionGracePeriodSeconds)
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return seconds(*pod.Spec.TerminationGracePeriodSeconds)
	}
	return DefaultGracePeriod
}

// seconds converts a grace period in seconds, negative as 0, saturating.
func seconds(s int64) time.Duration {
	const maxSeconds = int64(1<<63-1) / int64(time.Second)
	switch {
	case s <= 0:
		return 0
	case s > maxSeconds:
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(s) * time.Second
}
