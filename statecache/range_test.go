package statecache_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/syncpod/syncpod/statecache"
)

// collect returns what Range visits, failing on a key visited twice.
func collect[V any](t *testing.T, c *statecache.Cache[string, V]) map[string]V {
	t.Helper()
	got := map[string]V{}
	c.Range(func(k string, v V, _ error, _ time.Time) bool {
		if _, dup := got[k]; dup {
			t.Errorf("Range visited %q twice", k)
		}
		got[k] = v
		return true
	})
	return got
}

func TestLenCountsKeysWithEntries(t *testing.T) {
	c := statecache.New[string, int]()
	if n := c.Len(); n != 0 {
		t.Fatalf("new cache: Len = %d, want 0", n)
	}
	c.Set("a", 1, nil, at(1))
	c.Set("b", 2, nil, at(1))
	c.Set("a", 3, nil, at(2)) // overwrite: same key
	c.Set("a", 4, nil, at(0)) // refused
	if n := c.Len(); n != 2 {
		t.Fatalf("after Sets of a, b: Len = %d, want 2", n)
	}
	c.Delete("a")
	c.Delete("a")       // already gone
	c.Delete("missing") // never there
	if n := c.Len(); n != 1 {
		t.Fatalf("after Delete(a): Len = %d, want 1", n)
	}
	c.Set("a", 5, nil, at(0)) // no tombstone: any time is accepted
	if n := c.Len(); n != 2 {
		t.Fatalf("after Set of a again: Len = %d, want 2", n)
	}
	c.Delete("a")
	c.Delete("b")
	if n := c.Len(); n != 0 {
		t.Fatalf("after deleting everything: Len = %d, want 0", n)
	}
}

// TestLenAndRangeSkipWaiterOnlyKeys: a GetNewerThan waiting on a key that
// has no entry keeps a slot for it, which must not count as an entry.
func TestLenAndRangeSkipWaiterOnlyKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := statecache.New[string, int]()
		c.Set("present", 1, nil, at(1))
		c.Set("gone", 2, nil, at(1))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 2)
		for _, k := range []string{"awaited", "gone"} {
			go func() {
				_, err := c.GetNewerThan(ctx, k, at(5))
				done <- err
			}()
		}
		synctest.Wait() // both block, each registered on its key's slot
		// "gone" keeps its slot for its waiter after Delete, without a record.
		c.Delete("gone")
		synctest.Wait()
		if n := c.Len(); n != 1 {
			t.Fatalf("Len = %d with one entry and two waiter-only keys, want 1", n)
		}
		if got := collect(t, c); !maps.Equal(got, map[string]int{"present": 1}) {
			t.Fatalf("Range visited %v, want only present", got)
		}
		cancel()
		for range 2 {
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("GetNewerThan = %v, want context.Canceled", err)
			}
		}
	})
}

func TestRangeVisitsEveryEntryWithItsRecord(t *testing.T) {
	c := statecache.New[string, int]()
	errOdd := errors.New("odd")
	want := map[string]int{}
	for i := range 1000 {
		k := fmt.Sprintf("pod-%d", i)
		var err error
		if i%2 == 1 {
			err = errOdd
		}
		c.Set(k, i, err, at(float64(i)))
		want[k] = i
	}
	for i := 0; i < 1000; i += 10 {
		c.Delete(fmt.Sprintf("pod-%d", i))
		delete(want, fmt.Sprintf("pod-%d", i))
	}
	got := map[string]int{}
	c.Range(func(k string, v int, err error, modified time.Time) bool {
		if _, dup := got[k]; dup {
			t.Errorf("Range visited %q twice", k)
		}
		got[k] = v
		if wantErr := v%2 == 1; (err != nil) != wantErr || (wantErr && !errors.Is(err, errOdd)) {
			t.Errorf("%s: err = %v with value %d", k, err, v)
		}
		if !modified.Equal(at(float64(v))) {
			t.Errorf("%s: modified %v with value %d, want %v", k, modified, v, at(float64(v)))
		}
		return true
	})
	if !maps.Equal(got, want) {
		t.Fatalf("Range visited %d keys, want %d (diff in keys: %v)", len(got), len(want), symmetricDiff(got, want))
	}
	if n := c.Len(); n != len(want) {
		t.Fatalf("Len = %d, want %d", n, len(want))
	}
}

func TestRangeStopsWhenFnReturnsFalse(t *testing.T) {
	c := statecache.New[string, int]()
	for i := range 100 {
		c.Set(fmt.Sprintf("k%d", i), i, nil, at(1))
	}
	calls := 0
	c.Range(func(string, int, error, time.Time) bool {
		calls++
		return calls < 3
	})
	if calls != 3 {
		t.Fatalf("fn called %d times, want 3 (stop after the third returns false)", calls)
	}
	calls = 0
	c.Range(func(string, int, error, time.Time) bool {
		calls++
		return false
	})
	if calls != 1 {
		t.Fatalf("fn returning false at once was called %d times, want 1", calls)
	}
	c.Range(nil) // no-op, no panic
	statecache.New[string, int]().Range(func(string, int, error, time.Time) bool {
		t.Fatal("fn called on an empty cache")
		return true
	})
}

// TestRangeFnMayCallTheCache: fn runs outside every lock, so calling back
// into the cache, including on the key being visited and on keys in the
// same map bucket, must not deadlock. A deadlock fails the test by its
// watchdog instead of hanging the run.
func TestRangeFnMayCallTheCache(t *testing.T) {
	c := statecache.New[string, int]()
	for i := range 64 {
		c.Set(fmt.Sprintf("k%d", i), i, nil, at(1))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		visited := 0
		c.Range(func(k string, v int, _ error, _ time.Time) bool {
			visited++
			if got, err := c.Get(k); err != nil || got != v {
				t.Errorf("Get(%s) = %d, %v inside Range, want %d", k, got, err, v)
			}
			if !c.Set(k, v+1000, nil, at(2)) {
				t.Errorf("Set(%s) refused inside Range", k)
			}
			// A satisfied GetNewerThan takes the key's lock path only if it
			// has to wait; this one is ready and must not block.
			if got, err := c.GetNewerThan(context.Background(), k, at(1)); err != nil || got != v+1000 {
				t.Errorf("GetNewerThan(%s) = %d, %v inside Range", k, got, err)
			}
			c.Set("new-"+k, v, nil, at(1)) // may or may not be visited later
			c.Delete("new-" + k)
			_ = c.Len()
			c.Range(func(string, int, error, time.Time) bool { return false })
			if v%2 == 0 {
				c.Delete(k)
			}
			return true
		})
		if visited != 64 {
			t.Errorf("visited %d keys, want 64", visited)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Range with a callback into the cache did not return: deadlock")
	}
	if n := c.Len(); n != 32 {
		t.Fatalf("Len = %d after deleting the even keys inside Range, want 32", n)
	}
	for k, v := range collect(t, c) {
		if v < 1000 || v%2 == 0 {
			t.Fatalf("%s = %d: want the odd values Set inside Range", k, v)
		}
	}
}

// TestRangeWithConcurrentSetDelete runs Range while other goroutines Set and
// Delete "churn" keys and overwrite "stable" ones. Under -race it checks the
// lack of data races; it also checks the documented guarantees: every stable
// key is visited, no key twice, and every visit sees one record whose value,
// error and time belong together.
func TestRangeWithConcurrentSetDelete(t *testing.T) {
	c := statecache.New[string, int]()
	const stable, churn = 200, 200
	for i := range stable {
		c.Set(fmt.Sprintf("stable-%d", i), 0, recordErr(0), at(0))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				v := n*4 + w
				c.Set(fmt.Sprintf("stable-%d", n%stable), v, recordErr(v), at(float64(v)))
				k := fmt.Sprintf("churn-%d-%d", w, n%churn)
				c.Set(k, v, recordErr(v), at(float64(v)))
				if n%3 == 0 {
					c.Delete(k)
				}
			}
		})
	}
	for range 50 {
		seen := map[string]bool{}
		c.Range(func(k string, v int, err error, modified time.Time) bool {
			if seen[k] {
				t.Errorf("Range visited %q twice", k)
			}
			seen[k] = true
			if !errors.Is(err, recordErr(v)) || !modified.Equal(at(float64(v))) {
				t.Errorf("%s: torn record: value %d, err %v, modified %v", k, v, err, modified)
			}
			return true
		})
		for i := range stable {
			if k := fmt.Sprintf("stable-%d", i); !seen[k] {
				t.Fatalf("Range missed %s, which had an entry throughout", k)
			}
		}
		_ = c.Len()
	}
	close(stop)
	wg.Wait()

	// Quiescent again: Len and Range agree exactly, then drain to empty.
	all := collect(t, c)
	if n := c.Len(); n != len(all) {
		t.Fatalf("Len = %d, Range visited %d", n, len(all))
	}
	for k := range all {
		c.Delete(k)
	}
	if n := c.Len(); n != 0 {
		t.Fatalf("Len = %d after deleting every key, want 0", n)
	}
	if got := collect(t, c); len(got) != 0 {
		t.Fatalf("Range visited %v after deleting every key", slices.Sorted(maps.Keys(got)))
	}
}

// valueErr is an error that records the value it was stored with, so a
// visit can check that value and error come from one Set.
type valueErr int

func (e valueErr) Error() string { return fmt.Sprintf("value %d", int(e)) }

func recordErr(v int) error { return valueErr(v) }

func symmetricDiff(a, b map[string]int) []string {
	var out []string
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, "+"+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "-"+k)
		}
	}
	slices.Sort(out)
	return out
}
