package locks

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/puzpuzpuz/xsync/v3"
)

// KeyedMutex is a set of mutexes, one per key, that exist only while their
// key is locked.
//
// Unlike k8s.io/utils/keymutex's hashed mutex, keys are compared exactly:
// two pods never contend because their UIDs hash to the same stripe. Memory
// is proportional to the keys currently locked, not to every key ever seen,
// so pod churn does not grow it. Lock takes a context.
//
// A key is locked exactly while it is in an xsync.MapOf. Locking a free key
// is one MapOf.Compute that inserts it, unlocking one that deletes it; each
// touches a single hash bucket, so operations on different keys rarely share
// a lock or a cache line. Waiters queue in FIFO order and the lock is handed
// to the first of them on Unlock, so no waiter starves.
//
// The zero KeyedMutex is an unlocked KeyedMutex ready to use, like
// sync.Mutex; NewKeyedMutex returns one too. A KeyedMutex must not be
// copied after first use.
type KeyedMutex[K comparable] struct {
	init sync.Once
	// locked maps each locked key to its waiters (nil: none).
	locked *xsync.MapOf[K, *waitQueue]
}

// waitQueue holds the goroutines waiting for one key, each as a channel that
// is closed to hand it the lock. It is only read and changed inside
// MapOf.Compute for its key, which serialises it.
type waitQueue struct {
	waiters []chan struct{}
}

// NewKeyedMutex returns a KeyedMutex with no keys.
func NewKeyedMutex[K comparable]() *KeyedMutex[K] {
	m := &KeyedMutex[K]{}
	m.keys()
	return m
}

// keys returns the map of locked keys, made on first use so that the zero
// value works.
func (m *KeyedMutex[K]) keys() *xsync.MapOf[K, *waitQueue] {
	m.init.Do(func() { m.locked = xsync.NewMapOf[K, *waitQueue]() })
	return m.locked
}

// Lock locks key, waiting until it is free or ctx is done. It returns nil
// once the caller holds key, or an error wrapping ctx.Err() (and then does
// not hold it). A ctx that is already done fails even if key is free. If
// ctx is done just as the key is handed over, Lock passes it on to the next
// waiter and returns the error. Locks are not reentrant: locking a key the
// caller holds waits for ctx.
func (m *KeyedMutex[K]) Lock(ctx context.Context, key K) error {
	if ctx == nil {
		return &ArgError{Method: "KeyedMutex.Lock", Arg: "ctx", Reason: "must not be nil"}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("locks: KeyedMutex.Lock: %w", err)
	}
	var turn chan struct{}
	m.keys().Compute(key, func(q *waitQueue, loaded bool) (*waitQueue, bool) {
		if !loaded {
			return nil, false // free: now locked by us
		}
		if q == nil {
			q = &waitQueue{}
		}
		turn = make(chan struct{})
		q.waiters = append(q.waiters, turn)
		return q, false
	})
	if turn == nil {
		return nil
	}
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	m.keys().Compute(key, func(q *waitQueue, loaded bool) (*waitQueue, bool) {
		if q != nil {
			if i := slices.Index(q.waiters, turn); i >= 0 {
				q.waiters = slices.Delete(q.waiters, i, i+1)
				return q.orNil(), false
			}
		}
		// The lock was handed to us as ctx was done: pass it on.
		return handOff(q)
	})
	return fmt.Errorf("locks: KeyedMutex.Lock: %w", ctx.Err())
}

// TryLock locks key if it is free and reports whether it did. It never
// waits.
func (m *KeyedMutex[K]) TryLock(key K) bool {
	if _, held := m.keys().Load(key); held {
		return false
	}
	_, held := m.keys().LoadOrStore(key, nil)
	return !held
}

// Unlock unlocks key, handing it to the longest waiting Lock if there is
// one. Any goroutine may unlock a key, as with sync.Mutex. Unlocking a key
// that is not locked returns an error wrapping ErrNotLocked and changes
// nothing.
func (m *KeyedMutex[K]) Unlock(key K) error {
	held := true
	m.keys().Compute(key, func(q *waitQueue, loaded bool) (*waitQueue, bool) {
		if !loaded {
			held = false
			return nil, true
		}
		return handOff(q)
	})
	if !held {
		return fmt.Errorf("locks: KeyedMutex.Unlock(%v): %w", key, ErrNotLocked)
	}
	return nil
}

// Len returns the number of keys currently locked. It is what the mutex
// holds in memory, and drops back to zero when all keys are unlocked.
func (m *KeyedMutex[K]) Len() int {
	return m.keys().Size()
}

// handOff releases a held key inside Compute: it wakes the first waiter,
// who then holds the key, or deletes the key when nobody waits.
func handOff(q *waitQueue) (*waitQueue, bool) {
	if q == nil || len(q.waiters) == 0 {
		return nil, true
	}
	close(q.waiters[0])
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	return q.orNil(), false
}

// orNil returns q, or nil once it is empty.
func (q *waitQueue) orNil() *waitQueue {
	if len(q.waiters) == 0 {
		return nil
	}
	return q
}
