package statecache_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/syncpod/syncpod/statecache"
)

type podStatus struct {
	ID    string
	State string
}

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return base.Add(time.Duration(sec * float64(time.Second))) }

// cancelled returns a context that is already done, to probe GetNewerThan
// without blocking: a satisfied call returns the entry, an unsatisfied one
// the context error.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestGetNewerThanSemantics ports the kubelet cache's freshness cases:
// (modified, global) relative to T, and a missing pod with a global time.
func TestGetNewerThanSemantics(t *testing.T) {
	const T = 10.0
	ptr := func(v float64) *float64 { return &v }
	cases := []struct {
		name      string
		modified  *float64 // nil: no entry
		global    *float64 // nil: UpdateTime never called
		minTime   float64
		satisfied bool
	}{
		{"modified after T, global at T", ptr(T + 1), ptr(T), T, true},
		{"modified after T, global before T", ptr(T + 1), ptr(T - 10), T, true},
		{"modified before T, global after T", ptr(T - 1), ptr(T + 3), T, true},
		{"modified and global before T", ptr(T - 1), ptr(T - 1), T, false},
		{"missing pod, global T, min T-1", nil, ptr(T), T - 1, true},
		{"missing pod, global T, min T+1", nil, ptr(T), T + 1, false},
		{"modified after T, no global time", ptr(T + 1), nil, T, true},
		{"modified before T, no global time", ptr(T - 1), nil, T, false},
		{"missing pod, no global time", nil, nil, T, false},
		{"modified exactly T is not after T", ptr(T), nil, T, false},
		{"global exactly T is not after T", ptr(T - 1), ptr(T), T, false},
		{"missing pod, global exactly T", nil, ptr(T), T, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := statecache.New[string, *podStatus]()
			want := &podStatus{ID: "pod", State: "running"}
			if tc.modified != nil {
				c.Set("pod", want, nil, at(*tc.modified))
			}
			if tc.global != nil {
				c.UpdateTime(at(*tc.global))
			}
			got, err := c.GetNewerThan(cancelled(), "pod", at(tc.minTime))
			if !tc.satisfied {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("GetNewerThan = %v, %v; want unsatisfied (context.Canceled)", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("GetNewerThan: unexpected error %v", err)
			}
			if tc.modified == nil {
				if got != nil {
					t.Fatalf("missing pod: got %v, want nil status", got)
				}
			} else if got != want {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

func TestGetMissReturnsZero(t *testing.T) {
	c := statecache.New[string, *podStatus]()
	got, err := c.Get("nope")
	if got != nil || err != nil {
		t.Fatalf("Get on miss = %v, %v; want nil, nil", got, err)
	}
	vc := statecache.New[int, podStatus]()
	v, err := vc.Get(1)
	if v != (podStatus{}) || err != nil {
		t.Fatalf("Get on miss = %v, %v; want zero, nil", v, err)
	}
}

func TestCachedErrorsAreReturned(t *testing.T) {
	c := statecache.New[string, *podStatus]()
	errInspect := errors.New("inspect failed")
	partial := &podStatus{ID: "pod"}
	c.Set("pod", partial, errInspect, at(1))
	got, err := c.Get("pod")
	if got != partial || !errors.Is(err, errInspect) {
		t.Fatalf("Get = %v, %v; want %v, %v", got, err, partial, errInspect)
	}
	got, err = c.GetNewerThan(context.Background(), "pod", at(0))
	if got != partial || !errors.Is(err, errInspect) {
		t.Fatalf("GetNewerThan = %v, %v; want %v, %v", got, err, partial, errInspect)
	}
	// A later successful Set clears the error.
	ok := &podStatus{ID: "pod", State: "running"}
	c.Set("pod", ok, nil, at(2))
	if got, err := c.Get("pod"); got != ok || err != nil {
		t.Fatalf("Get after clearing Set = %v, %v", got, err)
	}
}

func TestSetRefusesOlderTimestamp(t *testing.T) {
	c := statecache.New[string, int]()
	steps := []struct {
		value   int
		ts      float64
		updated bool
		want    int
	}{
		{1, 5, true, 1},
		{2, 4, false, 1}, // older: refused
		{3, 5, true, 3},  // equal: overwrites
		{4, 6, true, 4},
		{5, 0, false, 4},
	}
	for i, s := range steps {
		if got := c.Set("k", s.value, nil, at(s.ts)); got != s.updated {
			t.Fatalf("step %d: Set(%d, t=%v) = %v, want %v", i, s.value, s.ts, got, s.updated)
		}
		if v, _ := c.Get("k"); v != s.want {
			t.Fatalf("step %d: Get = %d, want %d", i, v, s.want)
		}
	}
}

func TestDelete(t *testing.T) {
	c := statecache.New[string, int]()
	c.Set("k", 7, nil, at(5))
	c.Delete("k")
	if v, err := c.Get("k"); v != 0 || err != nil {
		t.Fatalf("Get after Delete = %v, %v", v, err)
	}
	// No tombstone: an older Set is accepted after Delete.
	if !c.Set("k", 8, nil, at(1)) {
		t.Fatal("Set after Delete refused")
	}
	c.Delete("absent") // no-op
	// A deleted key counts as missing for GetNewerThan.
	c.Delete("k")
	c.UpdateTime(at(3))
	if _, err := c.GetNewerThan(cancelled(), "k", at(3)); !errors.Is(err, context.Canceled) {
		t.Fatalf("deleted key, global == min: err = %v, want unsatisfied", err)
	}
	if v, err := c.GetNewerThan(cancelled(), "k", at(2)); v != 0 || err != nil {
		t.Fatalf("deleted key, global after min: = %v, %v; want 0, nil", v, err)
	}
}

func TestUpdateTimeIsMonotonic(t *testing.T) {
	c := statecache.New[string, int]()
	if _, ok := c.GlobalTime(); ok {
		t.Fatal("GlobalTime set before UpdateTime")
	}
	c.UpdateTime(at(5))
	c.UpdateTime(at(3))
	if g, ok := c.GlobalTime(); !ok || !g.Equal(at(5)) {
		t.Fatalf("GlobalTime = %v, %v; want %v", g, ok, at(5))
	}
}

func TestGetNewerThanContext(t *testing.T) {
	c := statecache.New[string, int]()
	var ae *statecache.ArgError
	var nilCtx context.Context
	if _, err := c.GetNewerThan(nilCtx, "k", at(0)); !errors.As(err, &ae) || ae.Arg != "ctx" {
		t.Fatalf("nil ctx: err = %v, want *ArgError for ctx", err)
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := c.GetNewerThan(ctx, "k", at(0))
			errc <- err
		}()
		synctest.Wait()
		select {
		case err := <-errc:
			t.Fatalf("GetNewerThan returned before cancel: %v", err)
		default:
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}

		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		defer dcancel()
		if _, err := c.GetNewerThan(dctx, "k", at(0)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want context.DeadlineExceeded", err)
		}
	})
	// Cancelled waiters leave nothing behind: a later Set still works and
	// satisfied checks are immediate.
	c.Set("k", 1, nil, at(1))
	if v, err := c.GetNewerThan(context.Background(), "k", at(0)); v != 1 || err != nil {
		t.Fatalf("GetNewerThan = %v, %v", v, err)
	}
}

// TestSetWakesOnlyItsKey blocks waiters on many keys and Sets the keys one at
// a time: after each Set exactly that key's waiters have returned.
func TestSetWakesOnlyItsKey(t *testing.T) {
	const keys, perKey = 50, 8
	synctest.Test(t, func(t *testing.T) {
		c := statecache.New[int, string]()
		var returned atomic.Int64
		var wg sync.WaitGroup
		results := make([][]string, keys)
		for k := range keys {
			results[k] = make([]string, perKey)
			for w := range perKey {
				wg.Go(func() {
					v, err := c.GetNewerThan(context.Background(), k, at(1))
					if err != nil {
						t.Errorf("key %d: %v", k, err)
					}
					results[k][w] = v
					returned.Add(1)
				})
			}
		}
		synctest.Wait()
		for k := range keys {
			c.Set(k, fmt.Sprint("v", k), nil, at(2))
			synctest.Wait()
			if got, want := returned.Load(), int64((k+1)*perKey); got != want {
				t.Fatalf("after Set of key %d: %d waiters returned, want %d", k, got, want)
			}
		}
		wg.Wait()
		for k := range keys {
			for w := range perKey {
				if results[k][w] != fmt.Sprint("v", k) {
					t.Fatalf("key %d waiter %d got %q", k, w, results[k][w])
				}
			}
		}
	})
}

// TestSetAtMinTimeDoesNotSatisfy: a Set exactly at minTime wakes the waiter,
// which re-checks and keeps waiting; a later one satisfies it.
func TestSetAtMinTimeDoesNotSatisfy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := statecache.New[string, int]()
		got := make(chan int, 1)
		go func() {
			v, _ := c.GetNewerThan(context.Background(), "k", at(5))
			got <- v
		}()
		synctest.Wait()
		c.Set("k", 1, nil, at(5))
		synctest.Wait()
		select {
		case v := <-got:
			t.Fatalf("satisfied by Set at minTime: %d", v)
		default:
		}
		c.Set("k", 2, nil, at(6))
		if v := <-got; v != 2 {
			t.Fatalf("got %d, want 2", v)
		}
	})
}

// TestUpdateTimeWakesOnlyPassedWaiters: waiters with minTimes 1..10 on
// missing keys; UpdateTime(5.5) releases exactly those with minTime < 5.5.
func TestUpdateTimeWakesOnlyPassedWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := statecache.New[int, *podStatus]()
		var returned atomic.Int64
		var wg sync.WaitGroup
		for i := 1; i <= 10; i++ {
			wg.Go(func() {
				v, err := c.GetNewerThan(context.Background(), i, at(float64(i)))
				if v != nil || err != nil {
					t.Errorf("waiter %d: %v, %v; want nil, nil", i, v, err)
				}
				returned.Add(1)
			})
		}
		synctest.Wait()
		c.UpdateTime(at(5.5))
		synctest.Wait()
		if got := returned.Load(); got != 5 {
			t.Fatalf("after UpdateTime(5.5): %d returned, want 5", got)
		}
		c.UpdateTime(at(10)) // 10 is not after 10: nobody new
		synctest.Wait()
		if got := returned.Load(); got != 9 {
			t.Fatalf("after UpdateTime(10): %d returned, want 9", got)
		}
		c.UpdateTime(at(11))
		wg.Wait()
	})
}

// TestDeleteWakesWaitersWhoRecheck: after Delete the waiter sees a missing
// key and keeps waiting; the global time passing minTime releases it with
// the zero value.
func TestDeleteWakesWaitersWhoRecheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := statecache.New[string, *podStatus]()
		c.Set("k", &podStatus{ID: "k"}, nil, at(1))
		type result struct {
			v   *podStatus
			err error
		}
		got := make(chan result, 1)
		go func() {
			v, err := c.GetNewerThan(context.Background(), "k", at(2))
			got <- result{v, err}
		}()
		synctest.Wait()
		c.Delete("k")
		synctest.Wait()
		select {
		case r := <-got:
			t.Fatalf("returned after Delete: %v", r)
		default:
		}
		c.UpdateTime(at(3))
		if r := <-got; r.v != nil || r.err != nil {
			t.Fatalf("got %v, %v; want nil, nil", r.v, r.err)
		}
	})
}

// TestNoLostWakeupSetDelete races waiters against Sets and Deletes of the
// same keys. Each round ends with a Set that satisfies every waiter of the
// round, and no UpdateTime is ever called, so a waiter that missed its
// wake-up would stay blocked until the watchdog.
func TestNoLostWakeupSetDelete(t *testing.T) {
	const keys, waitersPerKey = 8, 4
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	c := statecache.New[int, int]()
	watchdog, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	for r := range rounds {
		minTime := at(float64(r))
		var wg sync.WaitGroup
		for k := range keys {
			for range waitersPerKey {
				wg.Go(func() {
					v, err := c.GetNewerThan(watchdog, k, minTime)
					if err != nil {
						t.Errorf("round %d key %d: lost wake-up: %v", r, k, err)
						return
					}
					if v <= r {
						t.Errorf("round %d key %d: got value %d from an entry not newer than minTime", r, k, v)
					}
				})
			}
			wg.Go(func() {
				c.Set(k, r, nil, minTime) // not newer: must not satisfy
				c.Delete(k)
				c.Set(k, r+1, nil, at(float64(r)+0.5))
				c.Delete(k)
				c.Set(k, r+1, nil, at(float64(r)+0.7))
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}

// TestNoLostWakeupUpdateTime races waiters on missing keys against
// UpdateTime; every round's last UpdateTime passes every minTime.
func TestNoLostWakeupUpdateTime(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	c := statecache.New[int, int]()
	watchdog, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	for r := range rounds {
		var wg sync.WaitGroup
		for k := range 16 {
			wg.Go(func() {
				if _, err := c.GetNewerThan(watchdog, k, at(float64(r)+float64(k)/32)); err != nil {
					t.Errorf("round %d key %d: lost wake-up: %v", r, k, err)
				}
			})
		}
		wg.Go(func() {
			for i := range 4 {
				c.UpdateTime(at(float64(r) + float64(i)/4 + 0.2))
			}
		})
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}

func TestSubscribe(t *testing.T) {
	c := statecache.New[string, int]()
	sub, err := c.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	var got []statecache.Change[string, int]
	// next receives the change the last call handed over; each one was
	// visible in the cache before it was delivered.
	next := func() {
		t.Helper()
		select {
		case ch := <-sub.Events():
			got = append(got, ch)
		default:
			t.Fatal("no change delivered")
		}
	}
	c.Set("a", 1, nil, at(2))
	next()
	if v, _ := c.Get("a"); v != 1 {
		t.Errorf("Get after the Set's change = %d, want 1", v)
	}
	c.Set("a", 0, nil, at(1)) // refused: no change
	c.Delete("a")
	next()
	if v, _ := c.Get("a"); v != 0 {
		t.Errorf("Get after the Delete's change = %d", v)
	}
	c.Delete("a") // nothing removed: no change
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	c.Set("a", 3, nil, at(3))
	if ch, ok := <-sub.Events(); ok {
		t.Fatalf("change %+v after Close", ch)
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("Err after Close = %v, want nil", err)
	}
	want := []statecache.Change[string, int]{
		{Key: "a", Value: 1, Modified: at(2)},
		{Key: "a", Deleted: true, Modified: at(2)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d changes %v, want %v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("change %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A subscription whose reader falls behind ends with ErrOverflow after the
// changes that fit, without slowing the Sets or the other subscriptions.
func TestSubscribeOverflow(t *testing.T) {
	c := statecache.New[string, int]()
	small, err := c.Subscribe(2)
	if err != nil {
		t.Fatal(err)
	}
	big, err := c.Subscribe(10)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if !c.Set("k", i, nil, at(float64(i))) {
			t.Fatalf("Set %d refused", i)
		}
	}
	var n int
	for range small.Events() {
		n++
	}
	if n != 2 || !errors.Is(small.Err(), statecache.ErrOverflow) {
		t.Errorf("small subscription: %d changes, Err %v; want 2 and ErrOverflow", n, small.Err())
	}
	for i := range 5 {
		if ch := <-big.Events(); ch.Value != i {
			t.Errorf("big subscription change %d = %+v", i, ch)
		}
	}
	if err := big.Err(); err != nil {
		t.Errorf("big subscription Err = %v", err)
	}
	if err := small.Close(); err != nil || !errors.Is(small.Err(), statecache.ErrOverflow) {
		t.Errorf("Close after overflow = %v, Err %v; want nil and ErrOverflow kept", err, small.Err())
	}
	if err := big.Close(); err != nil {
		t.Fatal(err)
	}
}
