package statecache

import (
	"context"
	"fmt"
)

// WaitDeleted blocks until key has no entry, and returns nil: at once if
// key has none (it was never Set, or was Deleted), otherwise when a Delete
// removes it. A Delete that happens after WaitDeleted was called counts
// even if key is Set again before the call wakes up, so a short-lived
// deletion is never missed. A nil ctx is an *ArgError; when ctx is done
// first, WaitDeleted returns an error wrapping ctx.Err().
//
// Like GetNewerThan, it checks and registers under the key's lock, so a
// Delete cannot fall between the check and the wait (no lost wake-up), and
// only a change of key wakes it. UpdateTime does not: the global time says
// how fresh entries are, not that they are gone.
func (c *Cache[K, V]) WaitDeleted(ctx context.Context, key K) error {
	if ctx == nil {
		return &ArgError{Method: "WaitDeleted", Arg: "ctx", Reason: "must not be nil"}
	}
	if c.load(key) == nil {
		return nil
	}
	e, changed, deletes, done := c.registerDelete(key)
	if done {
		return nil
	}
	// From here e has a waiter (us), so it stays the key's entry.
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			c.unregister(key, e)
			return fmt.Errorf("statecache: WaitDeleted: %w", ctx.Err())
		}
		e.mu.Lock()
		if e.rec.Load() == nil || e.deletes != deletes {
			e.mu.Unlock()
			c.unregister(key, e)
			return nil
		}
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		changed = e.changed
		e.mu.Unlock()
	}
}

// registerDelete finds key's entry and, unless it has no record (done),
// counts a waiter on it and returns the channel to wait on and the entry's
// Delete count at registration.
func (c *Cache[K, V]) registerDelete(key K) (e *entry[V], changed chan struct{}, deletes uint64, done bool) {
	for {
		var ok bool
		e, ok = c.table().Load(key)
		if !ok {
			return nil, nil, 0, true
		}
		e.mu.Lock()
		if e.dead {
			e.mu.Unlock()
			continue
		}
		if e.rec.Load() == nil {
			e.mu.Unlock()
			return nil, nil, 0, true
		}
		e.waiters++
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		changed = e.changed
		deletes = e.deletes
		e.mu.Unlock()
		return e, changed, deletes, false
	}
}
