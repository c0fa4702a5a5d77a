// Package locks provides the locking primitives a kubelet-like node daemon needs
// to serialise work per pod without serialising the node.
//
//   - KeyedMutex[K]: one mutex per key (a pod UID, an image ref), with exact
//     keys, a context-aware Lock, TryLock, and Unlock that reports misuse as
//     an error. A key takes memory only while it is locked, so memory
//     follows the pods being worked on, not every pod ever seen. Waiters
//     get the key in FIFO order.
//   - Striped[K]: a fixed number of RW mutexes selected by key hash, for
//     callers that prefer fixed memory and accept that two keys may share a
//     stripe.
//   - Snapshot[T]: a copy-on-write holder on atomic.Pointer for read-mostly
//     state: lock-free Load, Store, and Update with a compare-and-swap loop.
//
// Usage:
//
//	var km locks.KeyedMutex[types.UID] // the zero value is ready, like sync.Mutex
//	if err := km.Lock(ctx, pod.UID); err != nil {
//		return err // ctx done: we do not hold the lock
//	}
//	defer km.Unlock(pod.UID)
//
// Compared with the kubelet: k8s.io/utils/keymutex.NewHashed(0) has
// runtime.NumCPU() stripes chosen by an FNV hash, so two pods on a 2-core
// node share a lock half the time; its Lock cannot be abandoned. KeyedMutex
// never shares a lock between keys, lets a caller give up with a context,
// and keeps its map in xsync.MapOf so that operations on different keys do
// not meet on one global mutex.
//
// Guarantees: mutual exclusion per key; zero values ready to use; a nil
// context is an *ArgError; a Lock that returns an error does
// not hold the key; no goroutines are started; KeyedMutex.Len returns to
// zero once every key is unlocked.
package locks
