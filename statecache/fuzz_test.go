package statecache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/statecache"
)

// FuzzNew feeds New every size hint and Subscribe every buffer: New never
// fails or panics, the Cache it makes stores, notifies and deletes, and a
// buffer outside [0, MaxBuffer] is an *ArgError with no subscription.
func FuzzNew(f *testing.F) {
	f.Add(0, 0)
	f.Add(100, 1)
	f.Add(-1, -1)
	f.Add(1<<62, statecache.MaxBuffer+1)
	f.Add(-1<<62, statecache.MaxBuffer)
	f.Fuzz(func(t *testing.T, sizeHint, buffer int) {
		c := statecache.New[string, int](statecache.WithSizeHint(sizeHint))
		sub, err := c.Subscribe(buffer)
		var ae *statecache.ArgError
		switch {
		case buffer < 0 || buffer > statecache.MaxBuffer:
			if sub != nil || !errors.As(err, &ae) || ae.Arg != "buffer" {
				t.Fatalf("Subscribe(%d) = %v, %v; want an *ArgError", buffer, sub, err)
			}
			return
		case err != nil:
			t.Fatalf("Subscribe(%d): %v", buffer, err)
		}
		if !c.Set("k", 1, nil, time.Unix(1, 0)) || c.Len() != 1 {
			t.Fatalf("WithSizeHint(%d): Set refused or Len = %d", sizeHint, c.Len())
		}
		if ch := <-sub.Events(); ch.Key != "k" || ch.Value != 1 {
			t.Fatalf("change = %+v", ch)
		}
		c.Delete("k")
		if err := c.WaitDeleted(context.Background(), "k"); err != nil || c.Len() != 0 {
			t.Fatalf("after Delete: WaitDeleted = %v, Len = %d", err, c.Len())
		}
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzNewMemo feeds NewMemo every option value: it never panics, refuses a
// bad value with a *ConfigError naming an option and no Memo, and a Memo it
// makes loads, remembers, invalidates and closes. A zero duration is the
// caller leaving the option out.
func FuzzNewMemo(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), 0)
	f.Add(int64(time.Minute), int64(time.Second), int64(time.Second), 4096)
	f.Add(int64(-1), int64(-1), int64(-1), -1)
	f.Add(int64(1<<63-1), int64(1<<63-1), int64(1<<63-1), 1<<62)
	f.Add(int64(-1<<63), int64(-1<<63), int64(-1<<63), -1<<62)
	f.Fuzz(func(t *testing.T, ttl, negativeTTL, loadTimeout int64, maxEntries int) {
		opts := []statecache.MemoOption{
			statecache.WithClock(clocktesting.NewFakeClock(time.Unix(0, 0))),
			statecache.WithMaxEntries(maxEntries),
		}
		for _, o := range []struct {
			d   int64
			opt func(time.Duration) statecache.MemoOption
		}{{ttl, statecache.WithTTL}, {negativeTTL, statecache.WithNegativeTTL}, {loadTimeout, statecache.WithLoadTimeout}} {
			if o.d != 0 {
				opts = append(opts, o.opt(time.Duration(o.d)))
			}
		}
		calls := 0
		load := func(_ context.Context, key string) (int, error) { calls++; return len(key), nil }
		m, err := statecache.NewMemo(load, opts...)
		if err != nil {
			var ce *statecache.ConfigError
			if m != nil || !errors.As(err, &ce) || ce.Option == "" || ce.Reason == "" {
				t.Fatalf("NewMemo refused with %T %v (Memo %v); want a *ConfigError and no Memo", err, err, m)
			}
			return
		}
		if ttl < 0 || negativeTTL < 0 || loadTimeout < 0 || maxEntries < 0 {
			t.Fatalf("NewMemo accepted ttl %d, negativeTTL %d, loadTimeout %d, maxEntries %d", ttl, negativeTTL, loadTimeout, maxEntries)
		}
		for range 2 {
			if v, err := m.Get(context.Background(), "key"); v != 3 || err != nil {
				t.Fatalf("Get = %v, %v", v, err)
			}
		}
		if calls != 1 || m.Len() != 1 {
			t.Fatalf("two Gets: %d loads, Len %d; want 1 and 1", calls, m.Len())
		}
		m.Invalidate("key")
		if m.Len() != 0 {
			t.Fatalf("Len after Invalidate = %d", m.Len())
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Get(context.Background(), "key"); !errors.Is(err, statecache.ErrClosed) {
			t.Fatalf("Get after Close = %v, want ErrClosed", err)
		}
	})
}
