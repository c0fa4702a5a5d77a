package statecache_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/statecache"
)

// Zero values, typed-nil options, use after Close and Close twice.
func TestMisuse(t *testing.T) {
	var c statecache.Cache[string, int] // the zero Cache works
	if !c.Set("k", 1, nil, time.Unix(1, 0)) {
		t.Fatal("Set on a zero Cache refused")
	}
	if v, err := c.Get("k"); v != 1 || err != nil {
		t.Fatalf("Get = %v, %v", v, err)
	}
	if c.Len() != 1 {
		t.Fatalf("Len = %d", c.Len())
	}
	sized := statecache.New[string, int](statecache.WithSizeHint(100), statecache.WithSizeHint(-1), nil)
	sized.Set("a", 1, nil, time.Unix(1, 0))
	if sized.Len() != 1 {
		t.Fatalf("sized cache Len = %d", sized.Len())
	}

	var zero statecache.Memo[string, int]
	var ae *statecache.ArgError
	if _, err := zero.Get(context.Background(), "k"); !errors.As(err, &ae) || ae.Arg != "Memo" {
		t.Fatalf("zero Memo Get: %v, want *ArgError saying use NewMemo", err)
	}

	var typedNil *clock.RealClock
	var ce *statecache.ConfigError
	load := func(context.Context, string) (int, error) { return 1, nil }
	if _, err := statecache.NewMemo(load, statecache.WithClock(typedNil)); !errors.As(err, &ce) || ce.Option != "WithClock" {
		t.Fatalf("typed-nil clock: %v, want *ConfigError for WithClock", err)
	}
	m, err := statecache.NewMemo(load, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := m.Get(context.Background(), "k"); !errors.Is(err, statecache.ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
}

// A Memo not made by NewMemo (zero value or nil pointer) never panics or
// hangs: Get says to use NewMemo, Invalidate does nothing, Len is 0 and
// Close returns nil, twice. Inside a synctest bubble a hang would be
// reported as a deadlock instead of stalling the test run.
func TestMisuseZeroMemo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var zero statecache.Memo[string, int]
		var nilMemo *statecache.Memo[string, int]
		for name, m := range map[string]*statecache.Memo[string, int]{"zero": &zero, "nil": nilMemo} {
			m.Invalidate("k")
			if n := m.Len(); n != 0 {
				t.Errorf("%s Memo: Len = %d", name, n)
			}
			var ae *statecache.ArgError
			if _, err := m.Get(context.Background(), "k"); !errors.As(err, &ae) || ae.Method != "Memo.Get" || ae.Arg != "Memo" || ae.Reason != "is not initialized: use NewMemo" {
				t.Errorf("%s Memo: Get = %v, want *ArgError saying use NewMemo", name, err)
			}
			for i := range 2 {
				if err := m.Close(); err != nil {
					t.Errorf("%s Memo: Close %d = %v", name, i+1, err)
				}
			}
			if _, err := m.Get(context.Background(), "k"); !errors.As(err, &ae) {
				t.Errorf("%s Memo: Get after Close = %v, want *ArgError", name, err)
			}
		}
	})
}

// A Subscription not made by Subscribe (zero value or nil pointer) has
// ended: Events is closed, Err says to use Subscribe, Close returns nil.
func TestMisuseZeroSubscription(t *testing.T) {
	var zero statecache.Subscription[string, int]
	var nilSub *statecache.Subscription[string, int]
	for name, s := range map[string]*statecache.Subscription[string, int]{"zero": &zero, "nil": nilSub} {
		if ch, ok := <-s.Events(); ok {
			t.Errorf("%s Subscription: Events delivered %+v, want a closed channel", name, ch)
		}
		var ae *statecache.ArgError
		if err := s.Err(); !errors.As(err, &ae) || ae.Arg != "Subscription" || ae.Reason != "is not initialized: use Cache.Subscribe" {
			t.Errorf("%s Subscription: Err = %v, want *ArgError saying use Subscribe", name, err)
		}
		for i := range 2 {
			if err := s.Close(); err != nil {
				t.Errorf("%s Subscription: Close %d = %v", name, i+1, err)
			}
		}
	}
}

// The zero Cache works for every method: subscriptions, waits, Range.
func TestMisuseZeroCache(t *testing.T) {
	var c statecache.Cache[string, int]
	if n := c.Len(); n != 0 {
		t.Fatalf("Len = %d", n)
	}
	if _, ok := c.GlobalTime(); ok {
		t.Fatal("GlobalTime set on a zero Cache")
	}
	c.Range(nil) // a nil fn visits nothing
	c.Delete("absent")
	sub, err := c.Subscribe(1)
	if err != nil {
		t.Fatalf("Subscribe on a zero Cache: %v", err)
	}
	c.Set("k", 1, nil, time.Unix(1, 0))
	if ch := <-sub.Events(); ch.Key != "k" || ch.Value != 1 {
		t.Fatalf("change = %+v", ch)
	}
	c.Delete("k")
	if ch := <-sub.Events(); !ch.Deleted {
		t.Fatalf("change = %+v, want the Delete", ch)
	}
	if err := c.WaitDeleted(context.Background(), "k"); err != nil {
		t.Fatalf("WaitDeleted = %v", err)
	}
	var nilCtx context.Context
	var ae *statecache.ArgError
	if _, err := c.GetNewerThan(nilCtx, "k", time.Unix(5, 0)); !errors.As(err, &ae) || ae.Arg != "ctx" {
		t.Fatalf("GetNewerThan(nil ctx) = %v, want *ArgError for ctx", err)
	}
	if err := sub.Close(); err != nil || sub.Err() != nil {
		t.Fatalf("Close = %v, Err = %v", err, sub.Err())
	}
}

// Subscribe refuses a negative buffer and one above MaxBuffer with an
// *ArgError and no subscription; 0 and MaxBuffer are accepted. A closed
// subscription is removed: later changes reach only the others.
func TestMisuseSubscribeBuffer(t *testing.T) {
	c := statecache.New[string, int]()
	for _, buffer := range []int{-1, statecache.MaxBuffer + 1, -1 << 62, 1 << 62} {
		var ae *statecache.ArgError
		if s, err := c.Subscribe(buffer); s != nil || !errors.As(err, &ae) || ae.Method != "Subscribe" || ae.Arg != "buffer" {
			t.Errorf("Subscribe(%d) = %v, %v; want an *ArgError for buffer", buffer, s, err)
		}
	}
	for _, buffer := range []int{0, 1, statecache.MaxBuffer} {
		s, err := c.Subscribe(buffer)
		if err != nil {
			t.Fatalf("Subscribe(%d): %v", buffer, err)
		}
		want := buffer
		if buffer == 0 {
			want = statecache.DefaultBuffer
		}
		if got := cap(s.Events()); got != want {
			t.Errorf("Subscribe(%d) buffer = %d, want %d", buffer, got, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A count limit of 0 is unlimited, a negative one is refused; every other
// bad option is a *ConfigError naming it.
func TestMisuseMemoOptions(t *testing.T) {
	load := func(_ context.Context, key string) (int, error) { return len(key), nil }
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	m, err := statecache.NewMemo(load, statecache.WithMaxEntries(0), statecache.WithClock(clk))
	if err != nil {
		t.Fatalf("WithMaxEntries(0): %v", err)
	}
	defer m.Close()
	const n = 5000 // above the default bound of 4096
	for i := range n {
		if _, err := m.Get(context.Background(), fmt.Sprint("key-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Len(); got != n {
		t.Fatalf("unlimited Memo holds %d results, want %d", got, n)
	}

	bounded, err := statecache.NewMemo(load, statecache.WithMaxEntries(2), statecache.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer bounded.Close()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := bounded.Get(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	if got := bounded.Len(); got != 2 {
		t.Fatalf("WithMaxEntries(2) Memo holds %d results", got)
	}

	for _, tt := range []struct {
		option string
		opt    statecache.MemoOption
	}{
		{"WithMaxEntries", statecache.WithMaxEntries(-1)},
		{"WithTTL", statecache.WithTTL(0)},
		{"WithTTL", statecache.WithTTL(-time.Second)},
		{"WithNegativeTTL", statecache.WithNegativeTTL(-time.Second)},
		{"WithLoadTimeout", statecache.WithLoadTimeout(-time.Second)},
		{"WithClock", statecache.WithClock(nil)},
	} {
		var ce *statecache.ConfigError
		if m, err := statecache.NewMemo(load, tt.opt); m != nil || !errors.As(err, &ce) || ce.Option != tt.option {
			t.Errorf("%s: NewMemo = %v, %v; want a *ConfigError for it", tt.option, m, err)
		}
	}
	var ce *statecache.ConfigError
	if m, err := statecache.NewMemo[string, int](nil); m != nil || !errors.As(err, &ce) || ce.Option != "load" {
		t.Errorf("nil loader: NewMemo = %v, %v; want a *ConfigError for load", m, err)
	}
}

// A size hint is never refused, however large: a huge one is capped
// instead of allocated.
func TestMisuseHugeSizeHint(t *testing.T) {
	for _, n := range []int{1 << 62, -1 << 62, 0} {
		c := statecache.New[string, int](statecache.WithSizeHint(n))
		c.Set("k", 1, nil, time.Unix(1, 0))
		if c.Len() != 1 {
			t.Fatalf("WithSizeHint(%d): Len = %d", n, c.Len())
		}
	}
}

// The zero errors print without panicking and name the package.
func TestMisuseZeroErrors(t *testing.T) {
	for _, err := range []error{&statecache.ConfigError{}, &statecache.ArgError{}} {
		if msg := err.Error(); len(msg) < 11 || msg[:11] != "statecache:" {
			t.Errorf("%T.Error() = %q", err, msg)
		}
	}
}
