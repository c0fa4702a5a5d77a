package crisim

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
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
	var l storeLock
	ctx := context.Background()
	if err := l.acquire(ctx, groupMutation); err != nil { // M1 holds
		t.Fatal(err)
	}
	listIn := make(chan struct{})
	go func() {
		l.acquire(ctx, groupList)
		close(listIn)
	}()
	waitWaiting := func(g lockGroup, n int) {
		t.Helper()
		for {
			l.mu.Lock()
			got := len(l.waiting[g])
			l.mu.Unlock()
			if got == n {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitWaiting(groupList, 1)
	// A mutation arriving behind a waiting List waits, though mutations hold.
	mIn := make(chan struct{})
	go func() {
		l.acquire(ctx, groupMutation)
		close(mIn)
	}()
	waitWaiting(groupMutation, 1)
	l.release() // M1 leaves: the List goes first
	<-listIn
	select {
	case <-mIn:
		t.Fatal("mutation got the store while a List held it")
	default:
	}
	l.release() // the List leaves: the mutation goes
	<-mIn
	l.release()
}
