package statecache

// Test hooks: what the internal tests inspect.

// waitingOn returns the number of GetNewerThan calls blocked on key and on
// the global time; for tests.
func (c *Cache[K, V]) waitingOn(key K) (onKey, onGlobal int) {
	if e, ok := c.table().Load(key); ok {
		e.mu.Lock()
		onKey = e.waiters
		e.mu.Unlock()
	}
	return onKey, c.global.len()
}

// slotCount returns the number of entries in the map, with records or
// waiters; for tests.
func (c *Cache[K, V]) slotCount() int {
	return c.table().Size()
}

// changedChan returns the channel key's waiters wait on; for tests.
func (c *Cache[K, V]) changedChan(key K) chan struct{} {
	if e, ok := c.table().Load(key); ok {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.changed
	}
	return nil
}
