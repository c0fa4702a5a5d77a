package criclient

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// snapshot is a shared, unfiltered list of one kind (sandboxes or
// containers) with a staleness bound.
//
// Guarantee: every answer comes from a runtime List call that started at
// most maxAge before the answered call began, and after the last mutation
// made through the client that completed before it began. Ages are measured
// from when the refresh STARTED (the runtime's view can be from any moment
// of the call), never from when it returned.
type snapshot[T any] struct {
	c      *Client
	method string
	maxAge time.Duration
	fetch  func(context.Context) ([]T, error)
	group  singleflight.Group
	// waiting counts callers waiting for a refresh (tests use it to know
	// every caller has joined).
	waiting atomic.Int64

	mu          sync.Mutex
	gen         uint64    // bumped by every mutation through the client
	items       []T       // valid only when has
	has         bool      //
	refreshedAt time.Time // when the refresh that produced items started
	flightSeq   uint64    // key of the newest refresh
	flightGen   uint64    // gen when that refresh was requested
	flightAt    time.Time // when that refresh was requested (not later than it started)
	flightOpen  bool      // the newest refresh may still be joined
}

type snapshotResult[T any] struct {
	items     []T
	startedAt time.Time
}

func newSnapshot[T any](c *Client, method string, maxAge time.Duration, fetch func(context.Context) ([]T, error)) *snapshot[T] {
	return &snapshot[T]{c: c, method: method, maxAge: maxAge, fetch: fetch}
}

// get returns the shared list; callers must not modify it or its elements.
func (s *snapshot[T]) get(ctx context.Context) ([]T, error) {
	if s.c.closed.Load() {
		return nil, &CallError{Method: s.method, Err: ErrClosed}
	}
	now := s.c.clock.Now()
	s.mu.Lock()
	if s.has && now.Sub(s.refreshedAt) <= s.maxAge {
		items, age := s.items, now.Sub(s.refreshedAt)
		defer s.served(age)
		// Refresh ahead: past half its life, start a background refresh
		// so that a new snapshot is there before this one expires, even
		// when the runtime is slow to answer Lists (a store lock held by a
		// mutation burst). Callers keep getting the current snapshot.
		if now.Sub(s.refreshedAt) > s.maxAge/2 && !s.joinableLocked(now) {
			seq, gen := s.newFlightLocked(now)
			s.mu.Unlock()
			s.group.DoChan(strconv.FormatUint(seq, 10), func() (any, error) { return s.refresh(seq, gen) })
			return items, nil
		}
		s.mu.Unlock()
		return items, nil
	}
	// Join the newest refresh only if it was requested after the last
	// invalidation and recently enough; otherwise request a new one.
	seq, gen := s.flightSeq, s.flightGen
	if !s.joinableLocked(now) {
		seq, gen = s.newFlightLocked(now)
	}
	s.mu.Unlock()

	ch := s.group.DoChan(strconv.FormatUint(seq, 10), func() (any, error) {
		return s.refresh(seq, gen)
	})
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(snapshotResult[T]).items, nil
	case <-ctx.Done():
		return nil, &CallError{Method: s.method, Err: ctx.Err()}
	}
}

// served tells the observer about a hit; deferred so that it runs after
// s.mu is released.
func (s *snapshot[T]) served(age time.Duration) {
	if s.c.observer != nil {
		s.c.observer(Event{Kind: SnapshotServed, Method: s.method, Age: age})
	}
}

// joinableLocked reports whether a caller arriving at now may take the
// answer of the newest refresh: it is still open, was requested after the
// last invalidation, and no more than maxAge before now.
func (s *snapshot[T]) joinableLocked(now time.Time) bool {
	return s.flightOpen && s.flightGen == s.gen && now.Sub(s.flightAt) <= s.maxAge
}

func (s *snapshot[T]) newFlightLocked(now time.Time) (seq, gen uint64) {
	s.flightSeq++
	s.flightGen = s.gen
	s.flightAt = now
	s.flightOpen = true
	return s.flightSeq, s.flightGen
}

// refresh runs on its own goroutine (singleflight.DoChan) under the client's
// lifetime context, so one caller giving up does not fail the others.
func (s *snapshot[T]) refresh(seq, gen uint64) (snapshotResult[T], error) {
	defer func() {
		s.mu.Lock()
		if s.flightSeq == seq {
			s.flightOpen = false
		}
		s.mu.Unlock()
	}()
	if !s.c.track() {
		return snapshotResult[T]{}, &CallError{Method: s.method, Err: ErrClosed}
	}
	defer s.c.background.Done()

	startedAt := s.c.clock.Now()
	items, err := invoke(s.c, s.c.life, s.method, none, s.fetch)
	if err != nil {
		return snapshotResult[T]{}, err
	}
	s.mu.Lock()
	if s.gen == gen && (!s.has || startedAt.After(s.refreshedAt)) {
		s.items, s.refreshedAt, s.has = items, startedAt, true
	}
	s.mu.Unlock()
	return snapshotResult[T]{items: items, startedAt: startedAt}, nil
}

// invalidate drops the snapshot and stops new callers from joining a refresh
// requested before now.
func (s *snapshot[T]) invalidate() {
	s.mu.Lock()
	s.gen++
	s.has = false
	s.items = nil
	s.mu.Unlock()
}
