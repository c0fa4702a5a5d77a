package statecache

import (
	"sync"
	"sync/atomic"
	"time"
)

// Change describes one accepted Set or one Delete, as delivered on a
// Subscription.
type Change[K comparable, V any] struct {
	// Key is the key that changed.
	Key K
	// Value and Err are what Set stored; zero for a Delete.
	Value V
	Err   error
	// Modified is the Set's timestamp, or for a Delete the modification time
	// of the removed entry.
	Modified time.Time
	// Deleted is true for a Delete.
	Deleted bool
}

const (
	// DefaultBuffer is the buffer of a subscription made by Subscribe(0).
	DefaultBuffer = 1024
	// MaxBuffer is the largest buffer Subscribe accepts.
	MaxBuffer = 1 << 16
)

// Subscription is one reader's copy of a Cache's changes (accepted Sets and
// Deletes that removed an entry), with its own bounded buffer. Changes are
// handed over without blocking, in the goroutine that made the change,
// after the change is visible; a reader that falls behind is not waited
// for: the subscription ends with ErrOverflow at the first change that does
// not fit, so its reader knows it missed something (Range over the cache
// and subscribe again). Changes of one key made concurrently may arrive in
// either order; compare Change.Modified, or call Get, when only the latest
// matters.
//
// Make one with Cache.Subscribe. A Subscription not made by it (its zero
// value, a nil pointer) has ended before it began: Events returns a closed
// channel, Err an *ArgError saying to use Subscribe, and Close returns nil.
type Subscription[K comparable, V any] struct {
	subs *subscribers[K, V] // nil: not made by Subscribe
	ch   chan Change[K, V]

	mu    sync.Mutex // guards ended, err, and every send on and the close of ch
	ended bool
	err   error
}

func (s *Subscription[K, V]) made() bool { return s != nil && s.subs != nil }

// Events returns the subscription's changes; the channel is closed when the
// subscription ends, after the changes already delivered, and Err then says
// why.
func (s *Subscription[K, V]) Events() <-chan Change[K, V] {
	if !s.made() {
		ch := make(chan Change[K, V])
		close(ch)
		return ch
	}
	return s.ch
}

// Err says why the subscription ended: nil while it runs or after its
// Close, ErrOverflow when its reader fell behind, an *ArgError for a
// Subscription not made by Subscribe. A Cache has no Close, so a
// subscription never ends with ErrClosed.
func (s *Subscription[K, V]) Err() error {
	if !s.made() {
		return &ArgError{Method: "Subscription.Err", Arg: "Subscription", Reason: "is not initialized: use Cache.Subscribe"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription: no change is delivered after it returns,
// and Events is closed. It is idempotent and returns nil.
func (s *Subscription[K, V]) Close() error {
	if !s.made() {
		return nil
	}
	s.end(nil)
	return nil
}

// end ends the subscription with err unless it already ended, and removes
// it from the cache's list.
func (s *Subscription[K, V]) end(err error) {
	s.mu.Lock()
	ended := s.endLocked(err)
	s.mu.Unlock()
	if ended {
		s.subs.remove(s)
	}
}

// endLocked ends the subscription with err and reports whether it did
// (false: it had already ended). The caller removes it from the list.
func (s *Subscription[K, V]) endLocked(err error) bool {
	if s.ended {
		return false
	}
	s.ended = true
	s.err = err
	close(s.ch)
	return true
}

// deliver hands ch to the subscription without blocking, ending it with
// ErrOverflow, in the same critical section, if its buffer is full: no
// later change can slip into the buffer after the lost one.
func (s *Subscription[K, V]) deliver(ch Change[K, V]) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	overflowed := false
	select {
	case s.ch <- ch:
	default:
		overflowed = s.endLocked(ErrOverflow)
	}
	s.mu.Unlock()
	if overflowed {
		s.subs.remove(s)
	}
}

// subscribers is a copy-on-write list of subscriptions: notify reads it with
// one atomic load and no lock; add and remove copy it under mu. Its zero
// value is an empty list, so a zero Cache can be subscribed to.
type subscribers[K comparable, V any] struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*Subscription[K, V]]
}

func (s *subscribers[K, V]) add(buffer int) *Subscription[K, V] {
	sub := &Subscription[K, V]{subs: s, ch: make(chan Change[K, V], buffer)}
	s.mu.Lock()
	defer s.mu.Unlock()
	var next []*Subscription[K, V]
	if cur := s.list.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, sub)
	s.list.Store(&next)
	return sub
}

func (s *subscribers[K, V]) remove(sub *Subscription[K, V]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.list.Load()
	if cur == nil {
		return
	}
	next := make([]*Subscription[K, V], 0, len(*cur))
	for _, x := range *cur {
		if x != sub {
			next = append(next, x)
		}
	}
	s.list.Store(&next)
}

func (s *subscribers[K, V]) notify(ch Change[K, V]) {
	cur := s.list.Load()
	if cur == nil {
		return
	}
	for _, sub := range *cur {
		sub.deliver(ch)
	}
}
