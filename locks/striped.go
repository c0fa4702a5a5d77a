package locks

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"unsafe"
)

// DefaultStripes is the number of stripes NewStriped uses for n < 1.
const DefaultStripes = 256

// Striped is a fixed set of RW mutexes; a key uses the stripe its hash
// selects. Memory is fixed at creation (about one cache line per stripe)
// whatever the number of keys.
//
// Two keys can share a stripe: they then exclude each other, as if they were
// one key, but never deadlock or lose exclusion. With s stripes and k keys
// locked at once, a given key collides with another with probability about
// 1-(1-1/s)^(k-1); pick s well above the expected concurrency (256 stripes
// and 16 concurrent pods: about 6%). When exact keys matter, use KeyedMutex.
//
// Locking two keys at once can deadlock if they share a stripe, or if two
// goroutines take their stripes in opposite order; lock one key at a time.
// Unlocking an unlocked stripe is a run-time error, as with sync.RWMutex.
//
// The zero Striped is ready to use with DefaultStripes stripes, like
// sync.RWMutex. A Striped must not be copied after first use.
type Striped[K comparable] struct {
	init    sync.Once
	seed    maphash.Seed
	mask    uint64
	stripes []paddedRWMutex
}

// paddedRWMutex keeps each stripe on its own cache line, so that stripes
// used by different cores do not slow each other down.
type paddedRWMutex struct {
	sync.RWMutex
	_ [64 - unsafe.Sizeof(sync.RWMutex{})%64]byte
}

// NewStriped returns a Striped lock with n stripes rounded up to a power of
// two; n < 1 means DefaultStripes.
func NewStriped[K comparable](n int) *Striped[K] {
	if n < 1 {
		n = DefaultStripes
	}
	if n > 1<<30 {
		n = 1 << 30
	}
	s := &Striped[K]{}
	s.init.Do(func() { s.setup(n) })
	return s
}

// setup makes n stripes (rounded up to a power of two) and the hash seed.
func (s *Striped[K]) setup(n int) {
	size := 1 << bits.Len(uint(n-1))
	s.seed = maphash.MakeSeed()
	s.mask = uint64(size - 1)
	s.stripes = make([]paddedRWMutex, size)
}

// ready sets up a zero Striped with DefaultStripes on first use.
func (s *Striped[K]) ready() {
	s.init.Do(func() { s.setup(DefaultStripes) })
}

// Lock write-locks key's stripe.
func (s *Striped[K]) Lock(key K) { s.stripe(key).Lock() }

// Unlock write-unlocks key's stripe.
func (s *Striped[K]) Unlock(key K) { s.stripe(key).Unlock() }

// RLock read-locks key's stripe.
func (s *Striped[K]) RLock(key K) { s.stripe(key).RLock() }

// RUnlock read-unlocks key's stripe.
func (s *Striped[K]) RUnlock(key K) { s.stripe(key).RUnlock() }

// TryLock write-locks key's stripe if it is free and reports whether it did.
func (s *Striped[K]) TryLock(key K) bool { return s.stripe(key).TryLock() }

// Stripes returns the number of stripes.
func (s *Striped[K]) Stripes() int {
	s.ready()
	return len(s.stripes)
}

// Index returns the stripe key uses, in [0, Stripes()). Keys with the same
// index share a lock.
func (s *Striped[K]) Index(key K) int {
	s.ready()
	return int(maphash.Comparable(s.seed, key) & s.mask)
}

func (s *Striped[K]) stripe(key K) *sync.RWMutex {
	return &s.stripes[s.Index(key)].RWMutex
}
