package statecache

import (
	"context"
	"fmt"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
)

// Cache is a concurrent, sharded cache of per-key state with modification
// times, with the freshness semantics of the kubelet's pod status cache
// (pkg/kubelet/container/cache.go) and none of its global lock.
//
// Each key's record is an immutable value in an xsync.MapOf: Get is a
// lock-free load, and Set/Delete update one key atomically with
// MapOf.Compute, which locks only that key's hash bucket. GetNewerThan
// waiters register on the key they wait for, so a Set wakes only that key's
// waiters, and on a min-heap of global waiters so that UpdateTime wakes only
// the waiters whose minTime it passes.
//
// The zero Cache is not usable; call New. A Cache must not be copied after
// first use.
type Cache[K comparable, V any] struct {
	slots  *xsync.MapOf[K, slot[V]]
	global globalTime
	subs   subscribers[K, V]
}

// record is one stored value with its error and modification time. Records
// are never mutated after they are published.
type record[V any] struct {
	value    V
	err      error
	modified time.Time
}

// slot is the map value for one key. It is replaced as a whole inside
// MapOf.Compute, so a lock-free Load always sees a consistent slot.
type slot[V any] struct {
	rec *record[V] // nil: no entry; the slot is then only kept for waiters

	// changed is closed when rec changes (Set accepted, Delete), waking every
	// GetNewerThan of this key so they re-check. Nil while no one waits.
	changed chan struct{}

	// waiters counts the GetNewerThan calls blocked on this key. A slot with
	// neither a record nor waiters is deleted, so waiting for keys that never
	// appear does not grow the map.
	waiters int
}

// New returns an empty Cache.
func New[K comparable, V any](opts ...Option) *Cache[K, V] {
	o := options{}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	var m *xsync.MapOf[K, slot[V]]
	if o.sizeHint > 0 {
		m = xsync.NewMapOf[K, slot[V]](xsync.WithPresize(o.sizeHint))
	} else {
		m = xsync.NewMapOf[K, slot[V]]()
	}
	return &Cache[K, V]{slots: m}
}

// Get returns the value and error stored for key. It never blocks and takes
// no lock. On a miss it returns the zero V (nil for a pointer V, such as a
// *PodStatus) and a nil error, like the kubelet returns an empty status.
func (c *Cache[K, V]) Get(key K) (V, error) {
	s, _ := c.slots.Load(key)
	return s.rec.get()
}

// Set stores value and err for key with modification time timestamp and
// reports whether it did. A Set whose timestamp is before the stored
// modification time is refused (returns false), so a slow writer can never
// replace newer state with older; an equal timestamp overwrites, as in the
// newer kubelet. An accepted Set wakes the GetNewerThan calls waiting on key
// (and no others), then calls the subscribers, outside any lock.
func (c *Cache[K, V]) Set(key K, value V, err error, timestamp time.Time) (updated bool) {
	// Refusal fast path: a key's modification time only grows (until Delete),
	// so a newer stored record seen here refuses this Set linearizably.
	if s, ok := c.slots.Load(key); ok && s.rec != nil && s.rec.modified.After(timestamp) {
		return false
	}
	rec := &record[V]{value: value, err: err, modified: timestamp}
	var changed chan struct{}
	c.slots.Compute(key, func(old slot[V], loaded bool) (slot[V], bool) {
		if loaded && old.rec != nil && old.rec.modified.After(timestamp) {
			return old, false
		}
		updated = true
		changed = old.changed
		return slot[V]{rec: rec, waiters: old.waiters}, false
	})
	if changed != nil {
		close(changed)
	}
	if updated {
		c.subs.notify(Change[K, V]{Key: key, Value: value, Err: err, Modified: timestamp})
	}
	return updated
}

// Delete removes the entry for key. GetNewerThan calls waiting on key are
// woken and re-check: a deleted key counts as missing, so they return (the
// zero V and nil error) once the global time passes their minTime, or the
// new record once key is Set again with a newer time. Delete keeps no
// tombstone: a later Set with any timestamp is accepted. Subscribers are
// called (with Deleted set) only if an entry was removed.
func (c *Cache[K, V]) Delete(key K) {
	if _, ok := c.slots.Load(key); !ok {
		return
	}
	var (
		changed chan struct{}
		removed *record[V]
	)
	c.slots.Compute(key, func(old slot[V], loaded bool) (slot[V], bool) {
		if !loaded {
			return old, true
		}
		changed, removed = old.changed, old.rec
		if old.waiters == 0 {
			return old, true
		}
		return slot[V]{waiters: old.waiters}, false
	})
	if changed != nil {
		close(changed)
	}
	if removed != nil {
		c.subs.notify(Change[K, V]{Key: key, Deleted: true, Modified: removed.modified})
	}
}

// UpdateTime sets the global time: every entry, including a missing one, is
// at least as fresh as timestamp. The global time only moves forward; an
// older timestamp is ignored. It wakes exactly the GetNewerThan calls whose
// minTime is before timestamp. Waiters are kept in a min-heap ordered by
// minTime, so the cost is O(w log n) for w woken out of n waiting, instead of
// the kubelet's walk over every subscriber.
func (c *Cache[K, V]) UpdateTime(timestamp time.Time) {
	c.global.advance(timestamp)
}

// GlobalTime returns the time last set by UpdateTime, and false if it was
// never called.
func (c *Cache[K, V]) GlobalTime() (time.Time, bool) {
	return c.global.load()
}

// GetNewerThan returns the value and error for key once the entry was
// modified after minTime, or the global time (UpdateTime) is after minTime.
// Both comparisons are strict. When satisfied by the global time with no
// entry for key, it returns the zero V and a nil error. Until UpdateTime is
// first called, the global time satisfies nothing.
//
// If the entry is already fresh enough it is returned without blocking, even
// if ctx is done. Otherwise GetNewerThan blocks until it is satisfied or ctx
// is done, and then returns the zero V and an error wrapping ctx.Err(), so
// errors.Is(err, context.Canceled) and context.DeadlineExceeded work.
//
// Only a change of key (Set, Delete) or an UpdateTime that passes minTime
// wakes the call; Sets of other keys never touch it.
func (c *Cache[K, V]) GetNewerThan(ctx context.Context, key K, minTime time.Time) (V, error) {
	// Lock-free fast path for the common case of an entry that is ready.
	s, _ := c.slots.Load(key)
	if c.fresh(s.rec, minTime) {
		return s.rec.get()
	}
	if ctx == nil {
		var zero V
		return zero, fmt.Errorf("statecache: GetNewerThan: %w", ErrNilContext)
	}
	if err := ctx.Err(); err != nil {
		var zero V
		return zero, fmt.Errorf("statecache: GetNewerThan: %w", err)
	}

	var (
		registered bool // counted in the key's slot.waiters
		gw         *globalWaiter
		gwChecked  bool
	)
	defer func() {
		// Runs after a satisfied check (which already unregistered from the
		// key) or on ctx done; gw may still be in the heap either way.
		c.global.unregister(gw)
	}()
	for {
		// Check and, if not yet satisfied, register on the key in one
		// Compute, so a Set of key cannot happen between them: either the
		// check sees its record, or the Set sees (and closes) our channel.
		var (
			changed chan struct{}
			rec     *record[V]
			done    bool
		)
		c.slots.Compute(key, func(old slot[V], loaded bool) (slot[V], bool) {
			if c.fresh(old.rec, minTime) {
				done, rec = true, old.rec
				if registered {
					old.waiters--
					registered = false
				}
				return old.release()
			}
			if !registered {
				old.waiters++
				registered = true
			}
			if old.changed == nil {
				old.changed = make(chan struct{})
			}
			changed = old.changed
			return old, false
		})
		if done {
			return rec.get()
		}
		if !gwChecked {
			gwChecked = true
			// Same pattern on the global time: register, and if UpdateTime
			// already passed minTime in the meantime, re-check at once.
			if gw = c.global.register(minTime); gw == nil {
				continue
			}
		}
		var globalReady <-chan struct{}
		if gw != nil {
			globalReady = gw.ready
		}
		select {
		case <-changed:
		case <-globalReady:
		case <-ctx.Done():
			c.slots.Compute(key, func(old slot[V], loaded bool) (slot[V], bool) {
				if !loaded {
					return old, true
				}
				old.waiters--
				return old.release()
			})
			var zero V
			return zero, fmt.Errorf("statecache: GetNewerThan: %w", ctx.Err())
		}
	}
}

// Subscribe registers fn to be called after every accepted Set and every
// Delete that removed an entry. fn runs in the goroutine that made the
// change, after the change is visible and outside every lock of the cache,
// so it may call the cache. Calls for concurrent changes of one key may
// arrive in either order; compare Change.Modified, or call Get, when only
// the latest matters. fn should be quick: it delays the Set that triggered
// it. The returned function removes the subscription; it is idempotent.
func (c *Cache[K, V]) Subscribe(fn func(Change[K, V])) (unsubscribe func()) {
	return c.subs.add(fn)
}

// fresh reports whether rec (nil: missing) satisfies minTime.
func (c *Cache[K, V]) fresh(rec *record[V], minTime time.Time) bool {
	if c.global.after(minTime) {
		return true
	}
	return rec != nil && rec.modified.After(minTime)
}

// get returns the stored value and error, or the zero V and nil for a nil
// record.
func (r *record[V]) get() (V, error) {
	if r == nil {
		var zero V
		return zero, nil
	}
	return r.value, r.err
}

// release returns s for a Compute callback, deleting it when it holds
// neither a record nor waiters. With no waiter left, its channel is dropped.
func (s slot[V]) release() (slot[V], bool) {
	if s.waiters == 0 {
		s.changed = nil
		return s, s.rec == nil
	}
	return s, false
}

// waitingOn returns the number of GetNewerThan calls blocked on key and on
// the global time; for tests.
func (c *Cache[K, V]) waitingOn(key K) (onKey, onGlobal int) {
	s, _ := c.slots.Load(key)
	return s.waiters, c.global.len()
}

// slotCount returns the number of slots in the map, records and waiter
// placeholders; for tests.
func (c *Cache[K, V]) slotCount() int {
	return c.slots.Size()
}
