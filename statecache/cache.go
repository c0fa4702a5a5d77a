package statecache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
)

// Cache is a concurrent, sharded cache of per-key state with modification
// times, with the freshness semantics of the kubelet's pod status cache
// (pkg/kubelet/container/cache.go) and none of its global lock.
//
// Keys map to entries in an xsync.MapOf, whose buckets are locked
// independently and read without locks. Each entry publishes its current
// record (value, error, modification time) through an atomic pointer, so Get
// and a ready GetNewerThan take no lock at all. Writers of one key are
// serialised by that entry's own mutex, so Sets of different pods never
// wait for each other. Entries are created and removed with MapOf.Compute.
//
// GetNewerThan waiters register on the entry of the key they wait for, so a
// Set wakes only that key's waiters, and on a min-heap of global waiters so
// that UpdateTime wakes only the waiters whose minTime it passes.
//
// The zero Cache is an empty Cache ready to use, as New returns. A Cache
// must not be copied after first use.
type Cache[K comparable, V any] struct {
	init    sync.Once
	entries *xsync.MapOf[K, *entry[V]]
	// live counts the entries holding a record, for Len. It is striped so
	// that creating and deleting keys from many goroutines does not make
	// them contend on one cache line.
	live   *xsync.Counter
	global globalTime
	subs   subscribers[K, V]
}

// record is one stored value with its error and modification time. Records
// are immutable once published.
type record[V any] struct {
	value    V
	err      error
	modified time.Time
}

// entry is the state of one key.
//
// Lock order: a MapOf bucket lock (inside Compute), then entry.mu. Nothing
// takes a bucket lock while holding an entry's mu.
type entry[V any] struct {
	rec atomic.Pointer[record[V]] // nil: no record (waiters only)

	mu sync.Mutex // serialises changes of rec and the fields below
	// dead is set when the entry is removed from the map. A writer that finds
	// a dead entry looks the key up again.
	dead bool
	// changed is closed when rec changes (Set accepted, Delete), waking the
	// key's waiters to re-check. Nil until a waiter needs it.
	changed chan struct{}
	// waiters counts the GetNewerThan and WaitDeleted calls blocked on the
	// key. An entry with waiters is never removed; one with neither a record
	// nor waiters is, so waiting for keys that never appear does not grow
	// the map.
	waiters int
	// deletes counts the Deletes that removed a record from this entry, so
	// that a WaitDeleted woken after a Delete and a new Set still sees the
	// Delete.
	deletes uint64
}

// New returns an empty Cache.
//
// New cannot fail: its only option is a hint. It returns no error, as
// constructors without a required dependency or a refusable option do in
// every syncpod package.
func New[K comparable, V any](opts ...Option) *Cache[K, V] {
	o := config{}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	c := &Cache[K, V]{}
	c.init.Do(func() { c.setup(o.sizeHint) })
	return c
}

func (c *Cache[K, V]) setup(sizeHint int) {
	sizeHint = min(sizeHint, maxSizeHint)
	if sizeHint > 0 {
		c.entries = xsync.NewMapOf[K, *entry[V]](xsync.WithPresize(sizeHint))
	} else {
		c.entries = xsync.NewMapOf[K, *entry[V]]()
	}
	c.live = xsync.NewCounter()
}

// table returns the entries, set up on first use of a zero Cache.
func (c *Cache[K, V]) table() *xsync.MapOf[K, *entry[V]] {
	c.init.Do(func() { c.setup(0) })
	return c.entries
}

// counter returns the live-entry counter, set up with the table.
func (c *Cache[K, V]) counter() *xsync.Counter {
	c.table()
	return c.live
}

// Get returns the value and error stored for key. It never blocks and takes
// no lock. On a miss it returns the zero V (nil for a pointer V, such as a
// *PodStatus) and a nil error, like the kubelet returns an empty status.
func (c *Cache[K, V]) Get(key K) (V, error) {
	return c.load(key).get()
}

// Set stores value and err for key with modification time timestamp and
// reports whether it did. A Set whose timestamp is before the stored
// modification time is refused (returns false), so a slow writer can never
// replace newer state with older; an equal timestamp overwrites, as in the
// newer kubelet. An accepted Set wakes the GetNewerThan calls waiting on key
// (and no others), then hands the change to the subscriptions (Subscribe).
func (c *Cache[K, V]) Set(key K, value V, err error, timestamp time.Time) (updated bool) {
	var rec *record[V]
	for {
		e, ok := c.table().Load(key)
		if ok {
			// Lock-free refusal: a live entry's time only grows, so a newer
			// record seen here refuses this Set linearizably.
			if old := e.rec.Load(); old != nil && old.modified.After(timestamp) {
				return false
			}
		} else {
			e, _ = c.table().LoadOrCompute(key, newEntry[V])
		}
		if rec == nil {
			rec = &record[V]{value: value, err: err, modified: timestamp}
		}
		e.mu.Lock()
		if e.dead {
			e.mu.Unlock()
			continue // deleted meanwhile: use the key's new entry
		}
		old := e.rec.Load()
		if old != nil && old.modified.After(timestamp) {
			e.mu.Unlock()
			return false
		}
		e.rec.Store(rec)
		if old == nil {
			c.counter().Inc()
		}
		changed := e.changed
		e.changed = nil
		e.mu.Unlock()
		if changed != nil {
			close(changed)
		}
		c.notify(Change[K, V]{Key: key, Value: value, Err: err, Modified: timestamp})
		return true
	}
}

// Delete removes the entry for key. GetNewerThan calls waiting on key are
// woken and re-check: a deleted key counts as missing, so they return (the
// zero V and nil error) once the global time passes their minTime, or the
// new record once key is Set again with a newer time. WaitDeleted calls
// waiting on key return. Delete keeps no tombstone: a later Set with any
// timestamp is accepted. The subscriptions get the change (with Deleted set)
// only if an entry was removed.
func (c *Cache[K, V]) Delete(key K) {
	if _, ok := c.table().Load(key); !ok {
		return
	}
	var (
		changed chan struct{}
		removed *record[V]
	)
	c.table().Compute(key, func(e *entry[V], loaded bool) (*entry[V], bool) {
		if !loaded {
			return e, true
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		removed = e.rec.Swap(nil)
		if removed != nil {
			c.counter().Dec()
			e.deletes++
		}
		changed, e.changed = e.changed, nil
		if e.waiters == 0 {
			e.dead = true
			return e, true
		}
		return e, false
	})
	if changed != nil {
		close(changed)
	}
	if removed != nil {
		c.notify(Change[K, V]{Key: key, Deleted: true, Modified: removed.modified})
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
	if rec := c.load(key); c.fresh(rec, minTime) {
		return rec.get()
	}
	if ctx == nil {
		var zero V
		return zero, &ArgError{Method: "GetNewerThan", Arg: "ctx", Reason: "must not be nil"}
	}
	if err := ctx.Err(); err != nil {
		var zero V
		return zero, fmt.Errorf("statecache: GetNewerThan: %w", err)
	}

	// Register on the key's entry, checking under its lock, so a Set of key
	// cannot fall between the check and the registration: either the check
	// sees the Set's record, or the Set sees (and closes) our channel.
	e, changed, rec, done := c.register(key, minTime)
	if done {
		return rec.get()
	}
	// From here e has a waiter (us), so it stays the key's entry.
	gw := c.global.register(minTime) // nil: the global time already passed minTime
	defer c.global.unregister(gw)
	for {
		var globalReady <-chan struct{}
		if gw != nil {
			globalReady = gw.ready
		} else {
			globalReady = closedChan
		}
		select {
		case <-changed:
		case <-globalReady:
		case <-ctx.Done():
			c.unregister(key, e)
			var zero V
			return zero, fmt.Errorf("statecache: GetNewerThan: %w", ctx.Err())
		}
		e.mu.Lock()
		rec = e.rec.Load()
		if c.fresh(rec, minTime) {
			e.mu.Unlock()
			c.unregister(key, e)
			return rec.get()
		}
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		changed = e.changed
		e.mu.Unlock()
	}
}

// closedChan stands for a wake-up that has already happened.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// register finds or creates key's entry and, unless it already satisfies
// minTime (done), counts a waiter on it and returns the channel to wait on.
func (c *Cache[K, V]) register(key K, minTime time.Time) (e *entry[V], changed chan struct{}, rec *record[V], done bool) {
	for {
		e, _ = c.table().LoadOrCompute(key, newEntry[V])
		e.mu.Lock()
		if e.dead {
			e.mu.Unlock()
			continue
		}
		if rec = e.rec.Load(); c.fresh(rec, minTime) {
			empty := rec == nil && e.waiters == 0
			e.mu.Unlock()
			if empty {
				c.removeIfEmpty(key, e) // we may have just created it
			}
			return e, nil, rec, true
		}
		e.waiters++
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		changed = e.changed
		e.mu.Unlock()
		return e, changed, nil, false
	}
}

// unregister drops a waiter from e, removing e if it is left empty.
func (c *Cache[K, V]) unregister(key K, e *entry[V]) {
	e.mu.Lock()
	e.waiters--
	empty := e.waiters == 0 && e.rec.Load() == nil
	if e.waiters == 0 {
		e.changed = nil
	}
	e.mu.Unlock()
	if empty {
		c.removeIfEmpty(key, e)
	}
}

// removeIfEmpty removes e from the map if it is still key's entry and holds
// neither a record nor waiters.
func (c *Cache[K, V]) removeIfEmpty(key K, e *entry[V]) {
	c.table().Compute(key, func(cur *entry[V], loaded bool) (*entry[V], bool) {
		if !loaded {
			return cur, true
		}
		if cur != e {
			return cur, false
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.waiters == 0 && e.rec.Load() == nil {
			e.dead = true
			return e, true
		}
		return e, false
	})
}

// Subscribe returns a subscription to the changes made from now on: every
// accepted Set and every Delete that removed an entry, buffering up to
// buffer changes (0: DefaultBuffer). A negative buffer or one above
// MaxBuffer is an *ArgError. A full buffer ends the subscription with
// ErrOverflow (see Subscription); it never slows a Set down beyond one
// non-blocking send per subscription. The zero Cache can be subscribed to.
func (c *Cache[K, V]) Subscribe(buffer int) (*Subscription[K, V], error) {
	switch {
	case buffer < 0:
		return nil, &ArgError{Method: "Subscribe", Arg: "buffer", Reason: fmt.Sprintf("%d is negative", buffer)}
	case buffer > MaxBuffer:
		return nil, &ArgError{Method: "Subscribe", Arg: "buffer", Reason: fmt.Sprintf("%d is above MaxBuffer (%d)", buffer, MaxBuffer)}
	case buffer == 0:
		buffer = DefaultBuffer
	}
	return c.subs.add(buffer), nil
}

// notify hands ch to the subscriptions. It runs after the change is visible
// and outside every lock of the cache but each subscription's own, which
// guards one non-blocking send.
func (c *Cache[K, V]) notify(ch Change[K, V]) {
	c.subs.notify(ch)
}

// load returns key's current record, or nil.
func (c *Cache[K, V]) load(key K) *record[V] {
	if e, ok := c.table().Load(key); ok {
		return e.rec.Load()
	}
	return nil
}

// fresh reports whether rec (nil: missing) satisfies minTime.
func (c *Cache[K, V]) fresh(rec *record[V], minTime time.Time) bool {
	if rec != nil && rec.modified.After(minTime) {
		return true
	}
	return c.global.after(minTime)
}

// get returns the record's value and error, or the zero V and nil for a nil
// record.
func (r *record[V]) get() (V, error) {
	if r == nil {
		var zero V
		return zero, nil
	}
	return r.value, r.err
}

func newEntry[V any]() *entry[V] { return &entry[V]{} }
