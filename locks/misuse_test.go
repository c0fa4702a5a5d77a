package locks_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/syncpod/syncpod/locks"
)

// The zero values work like sync.Mutex: no constructor needed, no panic.
func TestZeroValuesWork(t *testing.T) {
	var km locks.KeyedMutex[string]
	if err := km.Lock(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if km.TryLock("a") {
		t.Fatal("TryLock of a held key succeeded")
	}
	if km.Len() != 1 {
		t.Fatalf("Len = %d, want 1", km.Len())
	}
	if err := km.Unlock("a"); err != nil {
		t.Fatal(err)
	}

	var s locks.Striped[string]
	if s.Stripes() != locks.DefaultStripes {
		t.Fatalf("zero Striped has %d stripes, want %d", s.Stripes(), locks.DefaultStripes)
	}
	var wg sync.WaitGroup
	n := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Lock("k")
			n++
			s.Unlock("k")
		}()
	}
	wg.Wait()
	if n != 8 {
		t.Fatalf("n = %d", n)
	}
	var fresh locks.Striped[int]
	if !fresh.TryLock(1) {
		t.Fatal("TryLock on a zero Striped failed")
	}
	fresh.Unlock(1)
}

// Bad input gets a typed error, never a panic.
func TestMisuse(t *testing.T) {
	var km locks.KeyedMutex[string]
	var ae *locks.ArgError
	var nilCtx context.Context
	if err := km.Lock(nilCtx, "a"); !errors.As(err, &ae) || ae.Method != "KeyedMutex.Lock" || ae.Arg != "ctx" {
		t.Errorf("nil ctx: %v, want *ArgError", err)
	}
	if err := km.Unlock("never"); !errors.Is(err, locks.ErrNotLocked) {
		t.Errorf("Unlock of a free key: %v, want ErrNotLocked", err)
	}
	if err := km.Lock(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if err := km.Unlock("a"); err != nil {
		t.Fatal(err)
	}
	if err := km.Unlock("a"); !errors.Is(err, locks.ErrNotLocked) {
		t.Errorf("second Unlock: %v, want ErrNotLocked", err)
	}
	if s := locks.NewStriped[string](-3); s.Stripes() != locks.DefaultStripes {
		t.Errorf("NewStriped(-3): %d stripes, want the default", s.Stripes())
	}
}
