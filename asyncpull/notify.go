package asyncpull

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Subscription wakes one pod's worker when a result for the pod is ready or an image back-off
// the pod met has ended. Its channel has capacity one and is written without blocking: a
// pending signal stands for any number of completions and expiries ("pod is dirty"), so a slow
// reader never blocks the scheduler, never misses a wake-up and never overflows — after each
// receive, call Ensure for the pod's images to collect the results and start the retries.
type Subscription struct {
	s    *Scheduler
	pod  types.UID
	ch   chan struct{}
	once sync.Once
	err  error // guarded by s.mu
}

// Events returns the channel that receives a value when at least one result for the pod is
// ready or one of its back-offs has ended. It is closed when the subscription ends (Close, or
// the scheduler's Close).
func (sub *Subscription) Events() <-chan struct{} { return sub.ch }

// Err says why the subscription ended: nil while it runs or after its own Close, ErrClosed
// when the scheduler closed first.
func (sub *Subscription) Err() error {
	sub.s.mu.Lock()
	defer sub.s.mu.Unlock()
	return sub.err
}

// Subscribe returns a subscription for podUID. If results for the pod are already waiting to
// be collected, or a back-off it met has ended since its last Ensure for that image, C is
// signalled at once. Close it when the pod is gone. It returns an *ArgError for an empty pod
// and ErrClosed after Close.
func (s *Scheduler) Subscribe(podUID types.UID) (*Subscription, error) {
	if podUID == "" {
		return nil, &ArgError{Method: "Subscribe", Arg: "podUID", Reason: "must not be empty"}
	}
	if s.images == nil {
		return nil, errNotNew("Subscribe")
	}
	sub := &Subscription{s: s, pod: podUID, ch: make(chan struct{}, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	m := s.subs[podUID]
	if m == nil {
		m = map[*Subscription]struct{}{}
		s.subs[podUID] = m
	}
	m[sub] = struct{}{}
	if len(s.pending[podUID]) > 0 || len(s.retryDue[podUID]) > 0 {
		sub.ch <- struct{}{}
	}
	return sub, nil
}

// Close unregisters the subscription and closes its channel. It is idempotent and returns nil.
func (sub *Subscription) Close() error {
	sub.s.mu.Lock()
	defer sub.s.mu.Unlock()
	sub.endLocked(nil)
	return nil
}

// endLocked ends the subscription once, with why.
func (sub *Subscription) endLocked(why error) {
	sub.once.Do(func() {
		sub.err = why
		if m := sub.s.subs[sub.pod]; m != nil {
			delete(m, sub)
			if len(m) == 0 {
				delete(sub.s.subs, sub.pod)
			}
		}
		close(sub.ch)
	})
}

// markDirtyLocked wakes the pod's subscribers and queues it for the WithNotify callback.
// Neither can block: channel sends are non-blocking on capacity-one channels, and the callback
// set holds each pod at most once.
func (s *Scheduler) markDirtyLocked(pod types.UID) {
	for sub := range s.subs[pod] {
		select {
		case sub.ch <- struct{}{}:
		default: // already signalled: the reader will collect this result too
		}
	}
	if s.cfg.notify == nil || s.closed {
		return
	}
	if _, ok := s.dirtySet[pod]; ok {
		return
	}
	s.dirtySet[pod] = struct{}{}
	s.dirty = append(s.dirty, pod)
	select {
	case s.notifyKick <- struct{}{}:
	default:
	}
}

// notifyLoop calls the WithNotify callback for dirty pods, oldest first, outside the lock. A
// pod is removed from the set before its callback, so a completion during the callback marks
// it again and yields another call: wake-ups coalesce but are never lost.
func (s *Scheduler) notifyLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.notifyKick:
		}
		for {
			s.mu.Lock()
			if s.closed || len(s.dirty) == 0 {
				s.dirty = s.dirty[:0:0]
				s.mu.Unlock()
				break
			}
			pod := s.dirty[0]
			s.dirty = s.dirty[1:]
			delete(s.dirtySet, pod)
			s.mu.Unlock()
			s.cfg.notify(pod)
		}
	}
}
