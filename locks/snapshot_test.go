package locks_test

import (
	"maps"
	"sync"
	"testing"

	"github.com/syncpod/syncpod/locks"
)

func TestSnapshotZeroValue(t *testing.T) {
	var s locks.Snapshot[map[string]int]
	if s.Load() != nil {
		t.Fatal("zero Snapshot does not hold the zero value")
	}
	s.Store(map[string]int{"a": 1})
	if s.Load()["a"] != 1 {
		t.Fatal("Store not visible")
	}
}

// TestSnapshotUpdateLosesNothing: concurrent copy-on-write Updates each add
// their own key; none is lost to a lost CAS race.
func TestSnapshotUpdateLosesNothing(t *testing.T) {
	s := locks.NewSnapshot(map[int]bool{})
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				s.Update(func(old map[int]bool) map[int]bool {
					next := maps.Clone(old)
					next[w*each+i] = true
					return next
				})
			}
		})
		wg.Go(func() { // readers never see a map being written
			for range each {
				for range s.Load() {
				}
			}
		})
	}
	wg.Wait()
	if n := len(s.Load()); n != writers*each {
		t.Fatalf("len = %d, want %d", n, writers*each)
	}
}

func TestSnapshotUpdateReturnsNew(t *testing.T) {
	s := locks.NewSnapshot(1)
	if got := s.Update(func(old int) int { return old + 41 }); got != 42 || s.Load() != 42 {
		t.Fatalf("Update = %d, Load = %d; want 42", got, s.Load())
	}
}
