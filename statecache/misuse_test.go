package statecache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/utils/clock"

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
