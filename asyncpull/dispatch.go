package asyncpull

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// dispatchLoop is the scheduler's only long-lived goroutine (besides the notifier): it starts
// queued pulls when slots and tokens allow, enforces pull deadlines and wakes the pods waiting
// for an image back-off when it ends. It wakes on a kick (enqueue, completion, first pod
// waiting for a back-off) or on one clock timer for the earliest token, deadline or back-off
// expiry, so back-offs cost no goroutine or timer of their own.
func (s *Scheduler) dispatchLoop() {
	defer s.wg.Done()
	var timer clock.Timer
	for {
		wake, events := s.dispatch()
		s.emit(events)
		if timer != nil {
			timer.Stop()
			timer = nil
		}
		var timerC <-chan time.Time
		if !wake.IsZero() {
			d := wake.Sub(s.cfg.clock.Now())
			if d <= 0 {
				continue
			}
			timer = s.cfg.clock.NewTimer(d)
			timerC = timer.C()
		}
		select {
		case <-s.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case <-s.kick:
		case <-timerC:
		}
	}
}

// kickDispatch makes the dispatcher run again soon. It never blocks: a pending kick covers any
// number of later ones.
func (s *Scheduler) kickDispatch() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// dispatch starts what can start and returns when it should run again (zero: on a kick only).
func (s *Scheduler) dispatch() (time.Time, []Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return time.Time{}, nil
	}
	now := s.cfg.clock.Now()
	s.gcLocked(now)
	wake := s.expireBackOffsLocked(now)
	var events []Event
	for o := range s.runningOps {
		if o.deadline.IsZero() {
			continue
		}
		if !now.Before(o.deadline) {
			o.cancel(ErrTimeout)
		} else {
			wake = minTime(wake, o.deadline)
		}
	}
	if len(s.queue) == 0 {
		return wake, nil
	}
	items := make([]QueueItem, len(s.queue))
	for i, o := range s.queue {
		items[i] = QueueItem{Image: o.key.image, Registry: o.registry, Priority: o.priority, SizeHint: o.size,
			Waiters: len(o.waiters), Enqueued: o.enqueued, Seq: o.seq}
	}
	order := make([]int, len(s.queue))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case s.cfg.policy.Less(items[a], items[b], now):
			return -1
		case s.cfg.policy.Less(items[b], items[a], now):
			return 1
		}
		return 0
	})
	started := map[*op]bool{}
	for _, i := range order {
		o := s.queue[i]
		if s.cfg.maxParallel > 0 && len(s.runningOps) >= s.cfg.maxParallel {
			break
		}
		if lim := s.registryLimit(o.registry); lim > 0 && s.perRegistry[o.registry] >= lim {
			continue
		}
		if o.large && s.largeRunning >= s.cfg.largeSlots {
			continue
		}
		if s.tokens != nil && !s.tokens.AllowN(now, 1) {
			need := time.Duration((1-s.tokens.TokensAt(now))/s.cfg.qps*float64(time.Second)) + time.Nanosecond
			wake = minTime(wake, now.Add(need))
			break
		}
		started[o] = true
		events = append(events, s.startLocked(o, now))
		if !o.deadline.IsZero() {
			wake = minTime(wake, o.deadline)
		}
	}
	if len(started) > 0 {
		s.queue = slices.DeleteFunc(s.queue, func(o *op) bool { return started[o] })
	}
	return wake, events
}

func (s *Scheduler) registryLimit(reg string) int {
	if n, ok := s.cfg.registryLimit[reg]; ok {
		return n
	}
	return s.cfg.perRegistry
}

func (s *Scheduler) startLocked(o *op, now time.Time) Event {
	o.phase = phasePulling
	o.started = now
	if s.cfg.pullTimeout > 0 {
		o.deadline = now.Add(s.cfg.pullTimeout)
	}
	ctx, cancel := context.WithCancelCause(s.baseCtx)
	o.cancel = cancel
	s.runningOps[o] = struct{}{}
	s.counts.pullsStarted++
	s.perRegistry[o.registry]++
	if o.large {
		s.largeRunning++
	}
	s.log.Debug("pull started", s.fields(o, zap.Duration("queueWait", now.Sub(o.enqueued)), zap.Int("waiters", len(o.waiters)))...)
	s.wg.Add(1)
	go s.runPull(ctx, o)
	return Event{Kind: EventPullStarted, Image: o.key.image, Registry: o.registry, Waiters: len(o.waiters), QueueWait: now.Sub(o.enqueued)}
}

func (s *Scheduler) runPull(ctx context.Context, o *op) {
	defer s.wg.Done()
	ref, err := s.pullImage(ctx, o)
	var size uint64
	if err == nil {
		// Like the kubelet, read the size back for the record; errors here do not fail the pull.
		if st, serr := s.imageStatus(ctx, ref); serr == nil {
			size = st.GetImage().GetSize()
		}
	}
	var events []Event
	s.mu.Lock()
	defer func() { s.mu.Unlock(); s.emit(events) }()
	now := s.cfg.clock.Now()
	delete(s.runningOps, o)
	if s.perRegistry[o.registry]--; s.perRegistry[o.registry] <= 0 {
		delete(s.perRegistry, o.registry)
	}
	if o.large {
		s.largeRunning--
	}
	o.cancel(nil)
	s.kickDispatch()
	dur := now.Sub(o.started)
	cause := context.Cause(ctx)
	fin := Event{Kind: EventPullFinished, Image: o.key.image, Registry: o.registry, Duration: dur, Size: size, Waiters: len(o.waiters)}
	if err == nil {
		s.counts.pullsSucceeded++
		events = append(events, fin)
		rec := s.records[o.key.image]
		if rec == nil {
			rec = &imageRecord{pulledWith: map[string]bool{}}
			s.records[o.key.image] = rec
		}
		rec.present, rec.ref, rec.checkedAt = true, ref, now
		rec.pulledWith[o.cred] = true
		delete(s.backoff, backoffKey{image: o.key.image, cred: o.key.cred})
		s.delays.Reset(backoffKey{image: o.key.image, cred: o.key.cred})
		s.log.Info("pulled image", s.fields(o, zap.Duration("duration", dur), zap.Uint64("size", size), zap.Int("waiters", len(o.waiters)))...)
		s.finishLocked(o, Result{State: StatePresent, Image: o.key.image, ImageRef: ref})
		return
	}
	switch {
	case errors.Is(cause, ErrClosed), errors.Is(cause, ErrCanceled):
		res := s.canceledResult(o, cause, err)
		fin.Err = res.Err
		events = append(events, fin)
		s.finishLocked(o, res)
		return
	case errors.Is(cause, ErrTimeout):
		err = errors.Join(ErrTimeout, err)
	}
	s.counts.pullsFailed++
	class := classify(err)
	perr := &PullError{Image: o.key.image, Class: class, Err: err}
	fin.Err = perr
	events = append(events, fin)
	reason := ReasonErrImagePull
	if class == ErrRegistryUnavailable {
		reason = ReasonRegistryUnavailable
	}
	if class != ErrCanceled {
		b := s.nextBackOffLocked(backoffKey{image: o.key.image, cred: o.key.cred}, now, perr)
		events = append(events, Event{Kind: EventBackOff, Image: o.key.image, Registry: o.registry, BackOff: b, Err: perr})
	}
	s.log.Info("pull failed", s.fields(o, zap.Duration("duration", dur), zap.Error(perr))...)
	s.finishLocked(o, failed(o.key.image, reason, perr))
}
