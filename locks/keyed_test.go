package locks_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/syncpod/syncpod/locks"
)

// TestKeyedMutexMutualExclusion: many goroutines per key increment a
// non-atomic counter under the key's lock; the race detector and the final
// counts catch any overlap.
func TestKeyedMutexMutualExclusion(t *testing.T) {
	const keys, workers, iters = 16, 8, 200
	km := locks.NewKeyedMutex[string]()
	counts := make([]int, keys)
	inside := make([]int, keys)
	var wg sync.WaitGroup
	for k := range keys {
		key := fmt.Sprint("pod-", k)
		for range workers {
			wg.Go(func() {
				for range iters {
					if err := km.Lock(context.Background(), key); err != nil {
						t.Error(err)
						return
					}
					inside[k]++
					if inside[k] != 1 {
						t.Errorf("key %s: %d holders", key, inside[k])
					}
					counts[k]++
					inside[k]--
					if err := km.Unlock(key); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for k, n := range counts {
		if n != workers*iters {
			t.Fatalf("key %d: count %d, want %d", k, n, workers*iters)
		}
	}
	if n := km.Len(); n != 0 {
		t.Fatalf("Len after all unlocked = %d, want 0", n)
	}
}

// TestKeyedMutexNoEntryLeak: 1e5 distinct keys locked and unlocked leave the
// internal map empty, including keys whose Lock was abandoned or whose
// TryLock failed.
func TestKeyedMutexNoEntryLeak(t *testing.T) {
	km := locks.NewKeyedMutex[int]()
	for k := range 100_000 {
		if err := km.Lock(context.Background(), k); err != nil {
			t.Fatal(err)
		}
		if km.TryLock(k) {
			t.Fatalf("TryLock of held key %d succeeded", k)
		}
		if err := km.Unlock(k); err != nil {
			t.Fatal(err)
		}
	}
	if n := km.Len(); n != 0 {
		t.Fatalf("Len after 1e5 keys = %d, want 0", n)
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		for k := range 1000 {
			if err := km.Lock(context.Background(), k); err != nil {
				t.Fatal(err)
			}
			go func() { _ = km.Lock(ctx, k) }() // abandoned below
		}
		synctest.Wait()
		cancel()
		synctest.Wait()
		for k := range 1000 {
			if err := km.Unlock(k); err != nil {
				t.Fatal(err)
			}
		}
	})
	if n := km.Len(); n != 0 {
		t.Fatalf("Len after abandoned Locks = %d, want 0", n)
	}
}

func TestKeyedMutexLockContext(t *testing.T) {
	km := locks.NewKeyedMutex[string]()
	var ae *locks.ArgError
	var nilCtx context.Context
	if err := km.Lock(nilCtx, "a"); !errors.As(err, &ae) || ae.Arg != "ctx" {
		t.Fatalf("nil ctx: %v, want *ArgError for ctx", err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := km.Lock(done, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("done ctx on a free key: %v, want context.Canceled", err)
	}
	if km.Len() != 0 {
		t.Fatal("failed Lock left an entry")
	}
	synctest.Test(t, func(t *testing.T) {
		if err := km.Lock(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- km.Lock(ctx, "a") }()
		synctest.Wait()
		select {
		case err := <-errc:
			t.Fatalf("Lock of held key returned %v", err)
		default:
		}
		// A different key is not blocked.
		if !km.TryLock("b") {
			t.Fatal("TryLock(b) failed while only a is held")
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		// The abandoned Lock does not hold a: the owner unlocks, a waiter
		// gets it.
		go func() { errc <- km.Lock(context.Background(), "a") }()
		synctest.Wait()
		if err := km.Unlock("a"); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "b"} {
			if err := km.Unlock(k); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestKeyedMutexUnlockNotLocked(t *testing.T) {
	km := locks.NewKeyedMutex[string]()
	if err := km.Unlock("never"); !errors.Is(err, locks.ErrNotLocked) {
		t.Fatalf("err = %v, want ErrNotLocked", err)
	}
	if !km.TryLock("k") {
		t.Fatal("TryLock on free key failed")
	}
	if err := km.Unlock("k"); err != nil {
		t.Fatal(err)
	}
	if err := km.Unlock("k"); !errors.Is(err, locks.ErrNotLocked) {
		t.Fatalf("double Unlock: err = %v, want ErrNotLocked", err)
	}
	if km.Len() != 0 {
		t.Fatalf("Len = %d, want 0", km.Len())
	}
}

// TestKeyedMutexExactKeys: keys that a hashed mutex could map to one stripe
// never block each other.
func TestKeyedMutexExactKeys(t *testing.T) {
	km := locks.NewKeyedMutex[int]()
	for k := range 10_000 {
		if !km.TryLock(k) {
			t.Fatalf("TryLock(%d) failed with only other keys held", k)
		}
	}
	if n := km.Len(); n != 10_000 {
		t.Fatalf("Len = %d, want 10000", n)
	}
	for k := range 10_000 {
		if err := km.Unlock(k); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeyedMutexFIFOHandOff: waiters get the key in the order they queued,
// and one that gives up is skipped.
func TestKeyedMutexFIFOHandOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		km := locks.NewKeyedMutex[string]()
		if err := km.Lock(context.Background(), "pod"); err != nil {
			t.Fatal(err)
		}
		var (
			mu    sync.Mutex
			order []int
		)
		quitter, quit := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i := range 4 {
			ctx := context.Background()
			if i == 1 {
				ctx = quitter
			}
			wg.Go(func() {
				if err := km.Lock(ctx, "pod"); err != nil {
					if i != 1 || !errors.Is(err, context.Canceled) {
						t.Errorf("waiter %d: %v", i, err)
					}
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				if err := km.Unlock("pod"); err != nil {
					t.Error(err)
				}
			})
			synctest.Wait() // queued before the next one starts
		}
		quit()
		synctest.Wait()
		if err := km.Unlock("pod"); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if want := []int{0, 2, 3}; fmt.Sprint(order) != fmt.Sprint(want) {
			t.Fatalf("hand-off order %v, want %v", order, want)
		}
		if km.Len() != 0 {
			t.Fatalf("Len = %d, want 0", km.Len())
		}
	})
}
