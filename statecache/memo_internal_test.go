package statecache

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestMemoInvalidateBetweenEpochCheckAndStore forces an Invalidate into the
// window between a load deciding that its result is current and storing it.
// The stale result must not be served afterwards.
func TestMemoInvalidateBetweenEpochCheckAndStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		m, err := NewMemo(func(ctx context.Context, key string) (string, error) {
			return fmt.Sprint("v", calls.Add(1)), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		invalidated := make(chan struct{})
		var hooked atomic.Bool
		m.beforeStore = func() {
			if !hooked.CompareAndSwap(false, true) {
				return
			}
			go func() {
				m.Invalidate("k")
				close(invalidated)
			}()
			// Let Invalidate run as far as it can: to the end, or until it
			// waits for this store to finish.
			synctest.Wait()
		}
		ctx := context.Background()
		if v, err := m.Get(ctx, "k"); err != nil || v != "v1" {
			t.Fatalf("first Get = %q, %v; want v1", v, err)
		}
		<-invalidated
		if v, err := m.Get(ctx, "k"); err != nil || v != "v2" {
			t.Fatalf("Get after Invalidate = %q, %v; want v2 (the stale v1 survived Invalidate)", v, err)
		}
		if n := calls.Load(); n != 2 {
			t.Fatalf("loader calls = %d, want 2", n)
		}
	})
}
