package locks

import (
	"context"
	"fmt"

	"github.com/puzpuzpuz/xsync/v3"
)

// KeyedMutex is a set of mutexes, one per key, created on first use and freed
// when no goroutine holds or waits for them.
//
// Unlike k8s.io/utils/keymutex's hashed mutex, keys are compared exactly:
// two pods never contend because their UIDs hash to the same stripe. Memory
// is proportional to the keys currently locked or waited on, not to every
// key ever seen, so pod churn does not grow it. Lock takes a context.
//
// The entries live in an xsync.MapOf; a Lock or Unlock touches one hash
// bucket, so operations on different keys rarely share a lock or a cache
// line.
//
// The zero KeyedMutex is not usable; call NewKeyedMutex. A KeyedMutex must
// not be copied after first use.
type KeyedMutex[K comparable] struct {
	entries *xsync.MapOf[K, *keyedEntry]
}

// keyedEntry is the mutex of one key. Its fields are only changed inside
// MapOf.Compute for its key, which serialises them.
type keyedEntry struct {
	// sem holds one token while the key is locked; Lock sends, Unlock
	// receives. A channel lets Lock wait on it and on ctx.Done together.
	sem chan struct{}
	// refs counts holders and waiters; the entry is deleted when it drops to
	// zero.
	refs int
}

// NewKeyedMutex returns a KeyedMutex with no keys.
func NewKeyedMutex[K comparable]() *KeyedMutex[K] {
	return &KeyedMutex[K]{entries: xsync.NewMapOf[K, *keyedEntry]()}
}

// Lock locks key, waiting until it is free or ctx is done. It returns nil
// once the caller holds key, or an error wrapping ctx.Err() (and then does
// not hold it). A ctx that is already done fails even if key is free.
// Locks are not reentrant: locking a key the caller holds waits for ctx.
func (m *KeyedMutex[K]) Lock(ctx context.Context, key K) error {
	if ctx == nil {
		return fmt.Errorf("locks: KeyedMutex.Lock: %w", ErrNilContext)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("locks: KeyedMutex.Lock: %w", err)
	}
	var acquired bool
	e, _ := m.entries.Compute(key, func(e *keyedEntry, loaded bool) (*keyedEntry, bool) {
		if !loaded {
			e = &keyedEntry{sem: make(chan struct{}, 1)}
		}
		e.refs++
		// Take a free lock here, saving a second trip through the map.
		select {
		case e.sem <- struct{}{}:
			acquired = true
		default:
		}
		return e, false
	})
	if acquired {
		return nil
	}
	select {
	case e.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		m.release(key)
		return fmt.Errorf("locks: KeyedMutex.Lock: %w", ctx.Err())
	}
}

// TryLock locks key if it is free and reports whether it did. It never
// waits.
func (m *KeyedMutex[K]) TryLock(key K) bool {
	var acquired bool
	m.entries.Compute(key, func(e *keyedEntry, loaded bool) (*keyedEntry, bool) {
		if !loaded {
			e = &keyedEntry{sem: make(chan struct{}, 1)}
		}
		select {
		case e.sem <- struct{}{}:
			acquired = true
			e.refs++
		default:
		}
		return e, e.refs == 0
	})
	return acquired
}

// Unlock unlocks key. Any goroutine may unlock a key, as with sync.Mutex.
// Unlocking a key that is not locked returns an error wrapping ErrNotLocked
// and changes nothing.
func (m *KeyedMutex[K]) Unlock(key K) error {
	var held bool
	m.entries.Compute(key, func(e *keyedEntry, loaded bool) (*keyedEntry, bool) {
		if !loaded {
			return nil, true
		}
		select {
		case <-e.sem:
			held = true
			e.refs--
		default:
		}
		return e, e.refs == 0
	})
	if !held {
		return fmt.Errorf("locks: KeyedMutex.Unlock(%v): %w", key, ErrNotLocked)
	}
	return nil
}

// Len returns the number of keys currently locked or waited for. It is what
// the mutex holds in memory, and drops back to zero when all keys are
// unlocked.
func (m *KeyedMutex[K]) Len() int {
	return m.entries.Size()
}

// release drops a waiter's reference to key.
func (m *KeyedMutex[K]) release(key K) {
	m.entries.Compute(key, func(e *keyedEntry, loaded bool) (*keyedEntry, bool) {
		if !loaded {
			return nil, true
		}
		e.refs--
		return e, e.refs == 0
	})
}
