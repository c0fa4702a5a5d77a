package statecache

import (
	"sync"
	"sync/atomic"
	"time"
)

// Change describes one accepted Set or one Delete, as passed to a
// Cache.Subscribe callback.
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

// subscribers is a copy-on-write list of callbacks: notify reads it with one
// atomic load and no lock; add and remove copy it under mu.
type subscribers[K comparable, V any] struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*subscriber[K, V]]
}

type subscriber[K comparable, V any] struct {
	fn func(Change[K, V])
}

func (s *subscribers[K, V]) add(fn func(Change[K, V])) func() {
	if fn == nil {
		return func() {}
	}
	sub := &subscriber[K, V]{fn: fn}
	s.mu.Lock()
	var next []*subscriber[K, V]
	if cur := s.list.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, sub)
	s.list.Store(&next)
	s.mu.Unlock()

	var once sync.Once
	return func() { once.Do(func() { s.remove(sub) }) }
}

func (s *subscribers[K, V]) remove(sub *subscriber[K, V]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.list.Load()
	if cur == nil {
		return
	}
	next := make([]*subscriber[K, V], 0, len(*cur))
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
		sub.fn(ch)
	}
}
