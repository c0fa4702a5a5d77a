// Package statecache provides caches for the state a kubelet-like node daemon
// reads on every sync: a sharded cache of per-key state with freshness
// waits (Cache), and a memo for slow, rarely-changing lookups (Memo).
//
// # Cache
//
// Cache[K, V] replaces the kubelet's pod status cache
// (pkg/kubelet/container/cache.go). A relister Sets each pod's status with
// the time it was read, then calls UpdateTime with the relist time; a pod
// worker calls GetNewerThan to wait for a status newer than its last sync:
//
//	c := statecache.New[types.UID, *PodStatus]()
//	c.Set(uid, status, nil, relistStart) // refused if older than the stored one
//	c.UpdateTime(relistStart)            // every pod is at least this fresh
//	st, err := c.GetNewerThan(ctx, uid, lastSync)
//
// Semantics (those of the kubelet cache, with the differences marked):
//   - Get never blocks. A miss returns the zero V (nil for a pointer V) and a
//     nil error. A stored error is returned with the stored value.
//   - Set stores value, error and modification time. A timestamp before the
//     stored one is refused (Set returns false); an equal one overwrites.
//   - GetNewerThan(ctx, key, minTime) is satisfied when the entry was
//     modified after minTime, or the global time is after minTime; a missing
//     entry is then returned as the zero V and nil error. Before the first
//     UpdateTime the global time satisfies nothing. Both comparisons are
//     strict; the kubelet's notifier also fires at equality, inconsistently
//     with its own check. GetNewerThan returns ctx.Err() wrapped when ctx is
//     done; the kubelet's waits forever.
//   - UpdateTime only moves the global time forward.
//   - Delete wakes the key's waiters, which re-check and treat the key as
//     missing (the kubelet's Delete wakes nobody, which is equivalent).
//   - WaitDeleted(ctx, key) waits until key has no entry (the kubelet has
//     no such wait), with the same ctx handling and no lost wake-up.
//
// How it beats the kubelet cache: the kubelet keeps every pod under one
// RWMutex, so each Set stalls every reader on the node, and each UpdateTime
// walks every subscriber of every pod. Here Get is a lock-free load from an
// xsync.MapOf and an atomic pointer, Set locks only its own key's entry, a
// Set wakes only its key's waiters, and UpdateTime pops only the waiters it
// satisfies from a min-heap. There is no lost wake-up: a waiter checks and
// registers under its key's lock, and on the global time under the heap's
// lock, so a change either is seen by the check or sees the registration.
//
// Subscribe returns a Subscription: a channel of the changes (each accepted
// Set and each Delete that removed an entry) with a bounded buffer
// (DefaultBuffer, at most MaxBuffer). A change is handed over without
// blocking, outside the cache's locks; when the buffer is full the
// subscription ends with ErrOverflow and its channel is closed, so a slow
// reader never slows a Set and knows it missed changes (Range, then
// subscribe again). Len counts the keys with an entry, without a lock;
// Range visits every entry (a virtual-kubelet provider's GetPods), calling
// its callback outside every lock, so the callback may use the cache.
//
// # Memo
//
// Memo[K, V] remembers the results of lookups such as a device's numbers or
// a pod's cgroup path: TTL on an injectable clock, one loader call per key
// however many callers miss at once (singleflight), optional negative
// caching with its own TTL, and an LRU size bound. It lives here rather than
// in package locks because it is a cache of state, with the same users as
// Cache, while locks only provides mutual exclusion.
//
// A loader that panics is the caller's bug: the panic is carried out of the
// shared load and raised again in every Get that waited for it, in that
// Get's goroutine, and nothing is remembered.
//
// The zero Cache is ready to use, subscriptions included, and has no Close:
// it owns no goroutine, connection or timer. A Memo needs NewMemo: its zero
// value fails Get with an *ArgError saying so, remembers nothing and closes
// with nil. A Subscription needs Cache.Subscribe: its zero value has a
// closed Events channel and an *ArgError as Err. Bad options are
// *ConfigError, a nil context or a bad buffer an *ArgError, Memo.Get after
// Memo.Close ErrClosed.
//
// Neither type starts a goroutine of its own, except the loads of a Memo,
// which Memo.Close cancels and waits for.
package statecache
