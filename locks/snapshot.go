package locks

import "sync/atomic"

// Snapshot holds a value that is read often and replaced rarely, such as a
// node's configuration or a set of known pods. Load is one atomic load with
// no lock, so readers never wait for writers or each other.
//
// Values are copy-on-write: treat a loaded T as immutable, and have writers
// build a new T (copying maps and slices) instead of changing the old one.
//
// The zero Snapshot is ready to use and holds the zero T.
type Snapshot[T any] struct {
	p atomic.Pointer[T]
}

// NewSnapshot returns a Snapshot holding v.
func NewSnapshot[T any](v T) *Snapshot[T] {
	s := &Snapshot[T]{}
	s.Store(v)
	return s
}

// Load returns the current value.
func (s *Snapshot[T]) Load() T {
	if p := s.p.Load(); p != nil {
		return *p
	}
	var zero T
	return zero
}

// Store replaces the value with v.
func (s *Snapshot[T]) Store(v T) {
	s.p.Store(&v)
}

// Update replaces the value with fn(old) atomically and returns the new
// value. Concurrent Updates never lose each other's changes: if another
// writer replaced the value while fn ran, fn is called again with the newer
// value. fn may therefore run more than once and must not have side effects
// or change old.
func (s *Snapshot[T]) Update(fn func(old T) T) T {
	for {
		oldp := s.p.Load()
		var old T
		if oldp != nil {
			old = *oldp
		}
		next := fn(old)
		if s.p.CompareAndSwap(oldp, &next) {
			return next
		}
	}
}
