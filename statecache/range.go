package statecache

import "time"

// Len returns the number of keys with an entry: keys Set and not Deleted
// since. Keys that only have GetNewerThan calls waiting on them are not
// counted. Len takes no lock and does not walk the entries; its cost does
// not grow with the number of keys.
//
// Len is exact when no Set or Delete is in progress. While some are, it may
// or may not count the keys they are adding or removing, and it is never
// negative.
func (c *Cache[K, V]) Len() int {
	// The striped counter is summed without a lock, so a sum taken while keys
	// come and go can see a key's removal but not its addition.
	return int(max(c.counter().Value(), 0))
}

// Range calls fn for each key with an entry, with the value, error and
// modification time of that entry, until fn returns false. Keys that only
// have GetNewerThan calls waiting on them are skipped.
//
// Each call of fn sees one record exactly as one Set stored it: the value,
// error and time always belong together. Range as a whole is not a snapshot
// of the cache, as with sync.Map.Range:
//   - each key is visited at most once;
//   - a key that has an entry for the whole call, and is not Deleted during
//     it, is visited, with the record it holds at the moment of the visit;
//   - a key Set or Deleted concurrently with Range (including by fn) may or
//     may not be visited, and if visited may show any record it held during
//     the call.
//
// fn is called outside every lock of the cache, so it may call any method
// of the cache, including Set, Delete and Range itself, and a slow fn delays
// only the goroutine calling Range. Range costs O(keys) and allocates one
// small buffer. It holds one map bucket's lock at a time, only while copying
// that bucket's few entries: Gets never wait for it, Sets and Deletes of the
// keys in that bucket wait at most that long.
func (c *Cache[K, V]) Range(fn func(key K, value V, err error, modified time.Time) bool) {
	if fn == nil {
		return
	}
	// xsync.MapOf.Range copies each bucket under its lock and calls us after
	// unlocking it, which is what lets fn call back into the cache.
	c.table().Range(func(key K, e *entry[V]) bool {
		rec := e.rec.Load() // records are immutable: one load is one consistent record
		if rec == nil {
			return true // waiters only, or deleted
		}
		return fn(key, rec.value, rec.err, rec.modified)
	})
}
