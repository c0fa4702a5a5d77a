// Package backoff is the one exponential back-off the syncpod packages share:
// a per-key back-off for failing work (an image pull, a crashing container),
// with the kubelet's rules (initial delay, doubling, a cap, forgotten after
// twice the cap without a failure), and a sequence with jitter for
// reconnect loops. Both read time from the caller, so they are tested with a
// fake clock.
package backoff

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Policy is an exponential back-off: Initial, then doubling up to Max.
type Policy struct {
	// Initial is the first delay; it must be positive.
	Initial time.Duration
	// Max caps the delay; it must be at least Initial.
	Max time.Duration
}

// Validate says why p cannot be used, or returns nil.
func (p Policy) Validate() error {
	switch {
	case p.Initial <= 0:
		return fmt.Errorf("initial delay %v must be positive", p.Initial)
	case p.Max < p.Initial:
		return fmt.Errorf("maximum delay %v is shorter than the initial delay %v", p.Max, p.Initial)
	}
	return nil
}

// Keyed is a per-key back-off. The zero value is not usable: make one with
// NewKeyed. Keyed is not safe for concurrent use; callers hold their own lock.
type Keyed[K comparable] struct {
	p       Policy
	entries map[K]*entry
}

type entry struct {
	delay time.Duration
	until time.Time
	last  time.Time
}

// NewKeyed returns a per-key back-off following p (checked by the caller
// with Validate).
func NewKeyed[K comparable](p Policy) *Keyed[K] {
	return &Keyed[K]{p: p, entries: map[K]*entry{}}
}

// Fail records a failure of key at now and returns the delay before the next
// try: Initial for a first failure or one more than 2*Max after the previous
// failure, else twice the previous delay, at most Max.
func (b *Keyed[K]) Fail(key K, now time.Time) time.Duration {
	e := b.entries[key]
	if e == nil || now.Sub(e.last) > 2*b.p.Max {
		e = &entry{delay: b.p.Initial}
		b.entries[key] = e
	} else {
		e.delay = min(2*e.delay, b.p.Max)
	}
	e.until, e.last = now.Add(e.delay), now
	return e.delay
}

// Until returns when key's back-off ends, and whether key has one.
func (b *Keyed[K]) Until(key K) (time.Time, bool) {
	e := b.entries[key]
	if e == nil {
		return time.Time{}, false
	}
	return e.until, true
}

// Delay returns key's current delay (what the next try waits after its
// failure), and whether key has one.
func (b *Keyed[K]) Delay(key K) (time.Duration, bool) {
	e := b.entries[key]
	if e == nil {
		return 0, false
	}
	return e.delay, true
}

// Blocked reports whether key is backing off at now.
func (b *Keyed[K]) Blocked(key K, now time.Time) bool {
	e := b.entries[key]
	return e != nil && now.Before(e.until)
}

// Reset forgets key's failures (it succeeded).
func (b *Keyed[K]) Reset(key K) { delete(b.entries, key) }

// Forget drops the keys whose last failure is more than 2*Max before now,
// which Fail would restart from Initial anyway, so that the map stays as
// small as the set of keys failing lately.
func (b *Keyed[K]) Forget(now time.Time) {
	for k, e := range b.entries {
		if now.Sub(e.last) > 2*b.p.Max {
			delete(b.entries, k)
		}
	}
}

// Drop forgets the keys for which match reports true (a deleted pod's).
func (b *Keyed[K]) Drop(match func(K) bool) {
	for k := range b.entries {
		if match(k) {
			delete(b.entries, k)
		}
	}
}

// Len returns how many keys have a back-off.
func (b *Keyed[K]) Len() int { return len(b.entries) }

// Sequence is the delays of a retry loop: Initial, doubling up to Max, each
// spread by up to Jitter (a fraction, 0.2 = ±20%) so that many clients that
// lost the same server do not come back at the same instant. The zero value
// is not usable: set Policy.
type Sequence struct {
	Policy Policy
	// Jitter is the spread as a fraction of the delay, in [0, 1).
	Jitter float64
	// Rand, when set, draws the jitter (tests make it deterministic).
	Rand *rand.Rand

	next time.Duration
}

// Next returns the delay before the next try.
func (s *Sequence) Next() time.Duration {
	if s.next == 0 {
		s.next = s.Policy.Initial
	}
	d := s.next
	s.next = min(2*s.next, s.Policy.Max)
	if s.Jitter > 0 {
		f := rand.Float64
		if s.Rand != nil {
			f = s.Rand.Float64
		}
		d += time.Duration((2*f() - 1) * s.Jitter * float64(d))
	}
	return d
}

// Reset starts the sequence again from Initial (the connection worked).
func (s *Sequence) Reset() { s.next = 0 }
