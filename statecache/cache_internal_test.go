package statecache

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestSetDoesNotTouchOtherKeysWaiters checks the mechanism behind "wakes only
// the waiters of the key that changed": a Set of one key leaves the wake-up
// channel of every other key open.
func TestSetDoesNotTouchOtherKeysWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New[string, int]()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for _, k := range []string{"a", "b"} {
			go func() { _, _ = c.GetNewerThan(ctx, k, t0) }()
		}
		synctest.Wait()
		a := c.changedChan("a")
		c.Set("b", 1, nil, t0.Add(time.Second))
		synctest.Wait()
		select {
		case <-a:
			t.Fatal("Set of b closed a's channel")
		default:
		}
		if n, g := c.waitingOn("a"); n != 1 || g != 1 {
			t.Fatalf("waiting on a: key %d, global %d; want 1, 1", n, g)
		}
		cancel()
		synctest.Wait()
		if n, g := c.waitingOn("a"); n != 0 || g != 0 {
			t.Fatalf("after cancel: key %d, global %d; want 0, 0", n, g)
		}
	})
}

// TestWaitersOnMissingKeysLeaveNoSlots: abandoned waits for keys that never
// appeared do not grow the map.
func TestWaitersOnMissingKeysLeaveNoSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New[int, int]()
		ctx, cancel := context.WithCancel(context.Background())
		for k := range 1000 {
			go func() { _, _ = c.GetNewerThan(ctx, k, t0) }()
		}
		synctest.Wait()
		if got := c.slotCount(); got != 1000 {
			t.Fatalf("slots while waiting = %d, want 1000", got)
		}
		cancel()
		synctest.Wait()
		if got := c.slotCount(); got != 0 {
			t.Fatalf("slots after cancel = %d, want 0", got)
		}
		if _, g := c.waitingOn(0); g != 0 {
			t.Fatalf("global waiters after cancel = %d, want 0", g)
		}
	})
}

// TestSatisfiedWaitersUnregister: waiters satisfied by a Set drop out of the
// global heap, and those satisfied by UpdateTime drop their key slots.
func TestSatisfiedWaitersUnregister(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New[int, int]()
		for k := range 10 {
			go func() { _, _ = c.GetNewerThan(context.Background(), k, t0) }()
		}
		synctest.Wait()
		for k := range 5 {
			c.Set(k, k, nil, t0.Add(time.Second))
		}
		synctest.Wait()
		if _, g := c.waitingOn(0); g != 5 {
			t.Fatalf("global waiters = %d, want 5", g)
		}
		c.UpdateTime(t0.Add(time.Second))
		synctest.Wait()
		if _, g := c.waitingOn(0); g != 0 {
			t.Fatalf("global waiters = %d, want 0", g)
		}
		if got := c.slotCount(); got != 5 {
			t.Fatalf("slots = %d, want the 5 records", got)
		}
	})
}
