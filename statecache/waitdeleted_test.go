package statecache_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/syncpod/syncpod/statecache"
)

// A key that has no entry needs no waiting, even with a done ctx.
func TestWaitDeletedAbsent(t *testing.T) {
	var c statecache.Cache[string, int]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.WaitDeleted(ctx, "never-set"); err != nil {
		t.Fatalf("WaitDeleted of a key never Set = %v", err)
	}
	c.Set("k", 1, nil, at(1))
	c.Delete("k")
	if err := c.WaitDeleted(ctx, "k"); err != nil {
		t.Fatalf("WaitDeleted of a Deleted key = %v", err)
	}
}

// WaitDeleted returns once a Delete removes the key, and not before:
// neither Sets of the key nor UpdateTime wake it for good.
func TestWaitDeletedWakesOnDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := statecache.New[string, int]()
		c.Set("k", 1, nil, at(1))
		c.Set("other", 1, nil, at(1))
		done := make(chan error, 1)
		go func() { done <- c.WaitDeleted(context.Background(), "k") }()
		synctest.Wait()
		c.Set("k", 2, nil, at(2))
		c.UpdateTime(at(10))
		c.Delete("other")
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("WaitDeleted returned %v while k still has an entry", err)
		default:
		}
		c.Delete("k")
		if err := <-done; err != nil {
			t.Fatalf("WaitDeleted after Delete = %v", err)
		}
	})
}

// A Delete followed at once by a new Set of the key still ends the wait:
// the deletion happened after the call began.
func TestWaitDeletedSeesShortDeletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := statecache.New[string, int]()
		c.Set("k", 1, nil, at(1))
		done := make(chan error, 1)
		go func() { done <- c.WaitDeleted(context.Background(), "k") }()
		synctest.Wait()
		c.Delete("k")
		c.Set("k", 2, nil, at(2))
		if err := <-done; err != nil {
			t.Fatalf("WaitDeleted = %v", err)
		}
		if v, _ := c.Get("k"); v != 2 {
			t.Fatalf("Get = %d, want the new record", v)
		}
	})
}

// A done ctx ends the wait with ctx's error; a nil ctx is an *ArgError.
func TestWaitDeletedContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := statecache.New[string, int]()
		c.Set("k", 1, nil, at(1))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.WaitDeleted(ctx, "k") }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitDeleted after cancel = %v, want context.Canceled", err)
		}
		// The cancelled waiter left nothing behind: a Delete and a new
		// wait work as before.
		c.Delete("k")
		if err := c.WaitDeleted(context.Background(), "k"); err != nil {
			t.Fatalf("WaitDeleted after Delete = %v", err)
		}
		var nilCtx context.Context
		var ae *statecache.ArgError
		if err := c.WaitDeleted(nilCtx, "k"); !errors.As(err, &ae) || ae.Arg != "ctx" || ae.Method != "WaitDeleted" {
			t.Fatalf("WaitDeleted(nil ctx) = %v, want *ArgError for ctx", err)
		}
	})
}
