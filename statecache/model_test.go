package statecache_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/quick"
	"time"

	"github.com/syncpod/syncpod/statecache"
)

// referenceCache is the specification: one mutex, a plain map, and the
// freshness rule written out directly.
type referenceCache struct {
	mu     sync.Mutex
	items  map[int]referenceItem
	global *time.Time
}

type referenceItem struct {
	value    int
	err      error
	modified time.Time
}

func newReferenceCache() *referenceCache {
	return &referenceCache{items: map[int]referenceItem{}}
}

func (r *referenceCache) get(k int) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	it := r.items[k]
	return it.value, it.err
}

func (r *referenceCache) set(k, v int, err error, ts time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if it, ok := r.items[k]; ok && it.modified.After(ts) {
		return false
	}
	r.items[k] = referenceItem{v, err, ts}
	return true
}

func (r *referenceCache) delete(k int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.items, k)
}

func (r *referenceCache) updateTime(ts time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.global == nil || !r.global.After(ts) {
		r.global = &ts
	}
}

// newerThan returns the entry (or zero for a missing one) and whether
// GetNewerThan would return at once.
func (r *referenceCache) newerThan(k int, minTime time.Time) (int, error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	it, ok := r.items[k]
	if (r.global != nil && r.global.After(minTime)) || (ok && it.modified.After(minTime)) {
		return it.value, it.err, true
	}
	return 0, nil, false
}

var errModel = errors.New("model error")

// runModel applies a random operation sequence drawn from seed to the cache
// and to the reference, and reports the first divergence.
func runModel(seed uint64, ops int) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	c := statecache.New[int, int]()
	ref := newReferenceCache()
	ts := func() time.Time { return at(float64(rng.IntN(20))) } // small range: many ties
	for i := range ops {
		k := rng.IntN(6)
		switch op := rng.IntN(10); op {
		case 0, 1, 2:
			v := rng.IntN(1000)
			var err error
			if rng.IntN(5) == 0 {
				err = errModel
			}
			t := ts()
			if got, want := c.Set(k, v, err, t), ref.set(k, v, err, t); got != want {
				return fmt.Errorf("op %d: Set(%d, %d, %v, %v) = %v, want %v", i, k, v, err, t, got, want)
			}
		case 3:
			c.Delete(k)
			ref.delete(k)
		case 4:
			t := ts()
			c.UpdateTime(t)
			ref.updateTime(t)
		case 5, 6:
			gv, gerr := c.Get(k)
			wv, werr := ref.get(k)
			if gv != wv || gerr != werr {
				return fmt.Errorf("op %d: Get(%d) = %d, %v; want %d, %v", i, k, gv, gerr, wv, werr)
			}
		default:
			minTime := ts()
			gv, gerr := c.GetNewerThan(cancelled(), k, minTime)
			wv, werr, ok := ref.newerThan(k, minTime)
			if !ok {
				if !errors.Is(gerr, context.Canceled) {
					return fmt.Errorf("op %d: GetNewerThan(%d, %v) = %d, %v; want not ready", i, k, minTime, gv, gerr)
				}
			} else if gv != wv || gerr != werr {
				return fmt.Errorf("op %d: GetNewerThan(%d, %v) = %d, %v; want %d, %v", i, k, minTime, gv, gerr, wv, werr)
			}
		}
	}
	return nil
}

// TestModelAgainstReference checks the cache against the single-mutex
// reference on random operation sequences, testing/quick style.
func TestModelAgainstReference(t *testing.T) {
	f := func(seed uint64) bool {
		if err := runModel(seed, 400); err != nil {
			t.Logf("seed %d: %v", seed, err)
			return false
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 300, Rand: nil}); err != nil {
		t.Fatal(err)
	}
}
