package podworkers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// The clock is never called under w.mu: the fake clock runs AfterFunc
// callbacks (fire, which takes w.mu) while holding its own lock.

// enqueueLocked makes ps ready: queued at the back (or, while its call runs,
// marked to be queued when the call returns). It returns the timer to stop,
// outside the lock, and starts a goroutine when no free one will take ps.
func (w *Workers) enqueueLocked(ps *podState) clock.Timer {
	if ps.running {
		ps.again = true
		return nil
	}
	if ps.queued || ps.phase == PhaseFinished || w.closed {
		return nil
	}
	stop := w.disarmLocked(ps)
	ps.queued = true
	w.queue = append(w.queue, ps)
	free := w.active - w.busy
	if free < len(w.queue)-w.head && (w.cfg.maxParallel == 0 || w.active < w.cfg.maxParallel) {
		w.active++
		w.wg.Add(1)
		go w.loop()
	}
	return stop
}

// disarmLocked makes ps's timer stale and returns it to be stopped.
func (w *Workers) disarmLocked(ps *podState) clock.Timer {
	ps.seq++
	t := ps.timer
	ps.timer = nil
	return t
}

func (w *Workers) popLocked() *podState {
	if w.head == len(w.queue) {
		return nil
	}
	ps := w.queue[w.head]
	w.queue[w.head] = nil
	w.head++
	switch {
	case w.head == len(w.queue):
		w.queue, w.head = w.queue[:0], 0
	case w.head > 1024 && w.head > len(w.queue)/2:
		n := copy(w.queue, w.queue[w.head:])
		clear(w.queue[n:])
		w.queue, w.head = w.queue[:n], 0
	}
	return ps
}

// call is one Syncer call, as decided under the lock.
type call struct {
	ps      *podState
	ctx     context.Context
	cancel  context.CancelFunc
	phase   Phase
	reason  UpdateType
	pod     *corev1.Pod
	runtime RuntimePod
	orphan  bool
	grace   time.Duration
}

// loop is one pool goroutine: it makes calls for ready pods until none is
// left, then exits.
func (w *Workers) loop() {
	defer w.wg.Done()
	w.mu.Lock()
	for {
		ps := w.popLocked()
		if ps == nil || w.closed {
			w.active--
			w.mu.Unlock()
			return
		}
		c := w.startLocked(ps)
		w.mu.Unlock()
		w.run(c)
		w.mu.Lock()
	}
}

func (w *Workers) startLocked(ps *podState) call {
	ps.queued, ps.running, ps.again = false, true, false
	ctx, cancel := context.WithCancel(w.baseCtx)
	ps.cancel = cancel
	w.busy++
	c := call{ps: ps, ctx: ctx, cancel: cancel, phase: ps.phase, pod: ps.pod,
		runtime: ps.runtime, orphan: ps.orphan, grace: ps.grace}
	if ps.phase == PhaseSyncing {
		switch {
		case !ps.synced:
			c.reason = UpdateCreate
		case ps.reason != 0:
			c.reason = ps.reason
		default:
			c.reason = UpdateSync
		}
		ps.synced, ps.reason = true, 0
	}
	return c
}

// run makes the call outside the lock, then decides what comes next.
func (w *Workers) run(c call) {
	start := w.cfg.clock.Now()
	var res Result
	var err error
	switch {
	case c.phase == PhaseSyncing:
		res, err = w.syncer.SyncPod(c.ctx, c.reason, c.pod)
	case c.phase == PhaseTerminating && c.orphan:
		err = w.syncer.SyncTerminatingRuntimePod(c.ctx, c.runtime, c.grace)
	case c.phase == PhaseTerminating:
		err = w.syncer.SyncTerminatingPod(c.ctx, c.pod, c.grace)
	default:
		err = w.syncer.SyncTerminatedPod(c.ctx, c.pod)
	}
	c.cancel()
	now := w.cfg.clock.Now()
	// At most two events a call (the call, then back-off, terminating or
	// finished): kept on the stack, so a Workers without an observer does
	// not allocate for them.
	var buf [2]Event
	evs := append(buf[:0], Event{Kind: EventCall, UID: c.ps.uid, Phase: c.phase, Orphan: c.orphan, Duration: now.Sub(start), Err: err})

	w.mu.Lock()
	ps := c.ps
	w.busy--
	ps.running, ps.cancel = false, nil
	w.calls++
	if err != nil {
		w.failures++
	}
	if w.closed {
		w.mu.Unlock()
		w.emit(evs)
		return
	}
	next := time.Duration(-1) // < 0: no timer; 0: queue now
	retry := func() {
		d := w.backoff.Fail(ps.uid, now)
		if ps.again {
			next = 0
			return
		}
		next = d
		evs = append(evs, Event{Kind: EventBackOff, UID: ps.uid, Phase: c.phase, Orphan: c.orphan, Delay: d, Err: err})
	}
	switch {
	case c.phase != ps.phase:
		w.backoff.Reset(ps.uid) // killed during SyncPod: terminate now
		next = 0
	case err != nil:
		retry()
	case c.phase == PhaseSyncing:
		w.backoff.Reset(ps.uid)
		switch {
		case res.Terminal:
			ps.phase, ps.grace = PhaseTerminating, podGrace(ps.pod)
			evs = append(evs, Event{Kind: EventTerminating, UID: ps.uid})
			next = 0
		case ps.again:
			next = 0
		case res.RequeueAfter > 0:
			next = res.RequeueAfter
		case w.cfg.resync > 0:
			next = w.cfg.resync
		}
	case c.phase == PhaseTerminating && !c.orphan:
		w.backoff.Reset(ps.uid)
		ps.phase = PhaseTerminated
		next = 0
	default: // the last phase succeeded
		w.backoff.Reset(ps.uid)
		ps.phase, ps.pod = PhaseFinished, nil
		evs = append(evs, Event{Kind: EventFinished, UID: ps.uid, Orphan: c.orphan})
	}
	var stop clock.Timer
	var seq uint64
	switch {
	case next == 0:
		stop = w.enqueueLocked(ps)
	case next > 0:
		stop = w.disarmLocked(ps)
		seq = ps.seq
	}
	// Stats counts the call as running until its timer is armed and its
	// events observed, so a caller that waits for Queued == 0 and
	// Running == 0 before stepping a fake clock never steps past the timer.
	w.settling++
	w.mu.Unlock()
	if stop != nil {
		stop.Stop()
	}
	if next > 0 {
		w.arm(ps, seq, next)
	}
	w.emit(evs)
	w.mu.Lock()
	w.settling--
	w.mu.Unlock()
}

// arm starts ps's timer for d, unless ps was queued or re-armed meanwhile.
func (w *Workers) arm(ps *podState, seq uint64, d time.Duration) {
	t := w.cfg.clock.AfterFunc(d, func() { w.fire(ps, seq) })
	w.mu.Lock()
	keep := !w.closed && ps.seq == seq
	if keep {
		ps.timer = t
	}
	w.mu.Unlock()
	if !keep {
		t.Stop()
	}
}

// fire queues ps when the timer armed as seq is still current.
func (w *Workers) fire(ps *podState, seq uint64) {
	w.mu.Lock()
	if w.closed || ps.seq != seq || w.pods[ps.uid] != ps {
		w.mu.Unlock()
		return
	}
	ps.timer = nil
	w.enqueueLocked(ps) // ps has no other timer to stop
	w.mu.Unlock()
}
