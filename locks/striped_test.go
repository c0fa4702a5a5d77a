package locks_test

import (
	"sync"
	"testing"

	"github.com/syncpod/syncpod/locks"
)

func TestStripedSizes(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{0, locks.DefaultStripes}, {-3, locks.DefaultStripes}, {1, 1}, {3, 4}, {64, 64}, {65, 128}} {
		if got := locks.NewStriped[string](tc.n).Stripes(); got != tc.want {
			t.Errorf("NewStriped(%d).Stripes() = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestStripedMutualExclusion(t *testing.T) {
	s := locks.NewStriped[int](8)
	const keys, workers, iters = 32, 4, 200
	counts := make([]int, keys)
	var wg sync.WaitGroup
	for k := range keys {
		for range workers {
			wg.Go(func() {
				for range iters {
					s.Lock(k)
					counts[k]++
					s.Unlock(k)
					s.RLock(k)
					_ = counts[k]
					s.RUnlock(k)
				}
			})
		}
	}
	wg.Wait()
	for k, n := range counts {
		if n != workers*iters {
			t.Fatalf("key %d: %d, want %d", k, n, workers*iters)
		}
	}
}

func TestStripedIndexAndCollisions(t *testing.T) {
	s := locks.NewStriped[string](4)
	seen := map[int]bool{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		i := s.Index(k)
		if i < 0 || i >= s.Stripes() {
			t.Fatalf("Index(%q) = %d out of range", k, i)
		}
		if i != s.Index(k) {
			t.Fatalf("Index(%q) not stable", k)
		}
		seen[i] = true
	}
	// Ten keys on four stripes must collide (pigeonhole): keys sharing a
	// stripe exclude each other.
	var x, y string
	first := map[int]string{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		if prev, ok := first[s.Index(k)]; ok {
			x, y = prev, k
			break
		}
		first[s.Index(k)] = k
	}
	s.Lock(x)
	if s.TryLock(y) {
		t.Fatalf("%q and %q share stripe %d but both locked", x, y, s.Index(x))
	}
	s.Unlock(x)
	if !s.TryLock(y) {
		t.Fatal("TryLock after Unlock failed")
	}
	s.Unlock(y)
}
