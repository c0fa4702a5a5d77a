package crisim

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Mutations and Lists never hold the store together, members of a group do
// share it, cancelled waiters leave no trace, and everyone gets through.
func TestStoreLockInvariants(t *testing.T) {
	var l storeLock
	var holding [numGroups]atomic.Int64
	var maxShared [numGroups]atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for range 200 {
				g := lockGroup(rng.IntN(2))
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if rng.IntN(4) == 0 {
					ctx, cancel = context.WithTimeout(context.Background(), time.Duration(rng.IntN(50))*time.Microsecond)
				}
				err := l.acquire(ctx, g)
				cancel()
				if err != nil {
					continue
				}
				n := holding[g].Add(1)
				if other := holding[g.other()].Load(); other != 0 {
					t.Errorf("group %d holds with %d of the other group", g, other)
				}
				for m := maxShared[g].Load(); n > m && !maxShared[g].CompareAndSwap(m, n); m = maxShared[g].Load() {
				}
				time.Sleep(time.Duration(rng.IntN(20)) * time.Microsecond)
				holding[g].Add(-1)
				l.release()
			}
		})
	}
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holders != 0 || len(l.waiting[groupMutation]) != 0 || len(l.waiting[groupList]) != 0 {
		t.Fatalf("lock not empty at the end: holders %d, waiting %d/%d", l.holders, len(l.waiting[0]), len(l.waiting[1]))
	}
	for g := range numGroups {
		if maxShared[g].Load() < 2 {
			t.Errorf("group %d never shared the store (max %d holders)", g, maxShared[g].Load())
		}
	}
}

func TestStoreLockPhaseFair(t *testing.T) {
	// In a synctest bubble, synctest.Wait returns once every goroutine is
	// blocked on a channel (a waiter on its ready channel) or has returned,
	// so each check below sees the lock settled: no polling, and a waiter
	// that was wrongly let in has closed its channel before the check.
	synctest.Test(t, func(t *testing.T) {
		var l storeLock
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		waiting := func(g lockGroup) int {
			l.mu.Lock()
			defer l.mu.Unlock()
			return len(l.waiting[g])
		}
		closed := func(ch chan struct{}) bool {
			select {
			case <-ch:
				return true
			default:
				return false
			}
		}
		if err := l.acquire(ctx, groupMutation); err != nil { // M1 holds
			t.Fatal(err)
		}
		listIn := make(chan struct{})
		var listInErr error // read only after listIn is closed
		go func() {
			listInErr = l.acquire(ctx, groupList)
			close(listIn)
		}()
		synctest.Wait()
		if closed(listIn) || waiting(groupList) != 1 {
			t.Fatalf("List behind a mutation: in %v, waiting Lists %d; want it waiting", closed(listIn), waiting(groupList))
		}
		// A mutation arriving behind a waiting List waits, though mutations hold.
		mIn := make(chan struct{})
		var mInErr error // read only after mIn is closed
		go func() {
			mInErr = l.acquire(ctx, groupMutation)
			close(mIn)
		}()
		synctest.Wait()
		if closed(mIn) || waiting(groupMutation) != 1 {
			t.Fatalf("mutation behind a waiting List: in %v, waiting mutations %d; want it waiting", closed(mIn), waiting(groupMutation))
		}
		l.release() // M1 leaves: the List goes first
		synctest.Wait()
		if !closed(listIn) || listInErr != nil {
			t.Fatalf("List not admitted when the mutation holding the store left (in %v, err %v)", closed(listIn), listInErr)
		}
		if closed(mIn) {
			t.Fatal("mutation got the store while a List held it")
		}
		l.release() // the List leaves: the mutation goes
		synctest.Wait()
		if !closed(mIn) || mInErr != nil {
			t.Fatalf("mutation not admitted when the List left (in %v, err %v)", closed(mIn), mInErr)
		}
		l.release()
	})
}
