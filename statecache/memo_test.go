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

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/statecache"
)

// countingLoader returns "<key>#<n>" where n counts its calls for key.
type countingLoader struct {
	mu    sync.Mutex
	calls map[string]int
	err   error
}

func (l *countingLoader) load(_ context.Context, key string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[string]int{}
	}
	l.calls[key]++
	if l.err != nil {
		return "", l.err
	}
	return fmt.Sprintf("%s#%d", key, l.calls[key]), nil
}

func (l *countingLoader) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[key]
}

func mustMemo(t *testing.T, load statecache.Loader[string, string], opts ...statecache.MemoOption) *statecache.Memo[string, string] {
	t.Helper()
	m, err := statecache.NewMemo(load, opts...)
	if err != nil {
		t.Fatalf("NewMemo: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func mustGet(t *testing.T, m *statecache.Memo[string, string], key, want string) {
	t.Helper()
	got, err := m.Get(context.Background(), key)
	if err != nil || got != want {
		t.Fatalf("Get(%q) = %q, %v; want %q", key, got, err, want)
	}
}

func TestMemoTTLWithFakeClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(base)
	var l countingLoader
	m := mustMemo(t, l.load, statecache.WithTTL(time.Minute), statecache.WithClock(clk))
	mustGet(t, m, "sda", "sda#1")
	clk.Step(time.Minute) // expiry is after the TTL, not at it
	mustGet(t, m, "sda", "sda#1")
	clk.Step(time.Nanosecond)
	mustGet(t, m, "sda", "sda#2")
	if n := l.count("sda"); n != 2 {
		t.Fatalf("loader calls = %d, want 2", n)
	}
}

func TestMemoNegativeCaching(t *testing.T) {
	errNoDevice := errors.New("no such device")
	clk := clocktesting.NewFakeClock(base)
	t.Run("off by default", func(t *testing.T) {
		l := countingLoader{err: errNoDevice}
		m := mustMemo(t, l.load, statecache.WithClock(clk))
		for range 3 {
			if _, err := m.Get(context.Background(), "sdz"); !errors.Is(err, errNoDevice) {
				t.Fatalf("err = %v, want %v", err, errNoDevice)
			}
		}
		if n := l.count("sdz"); n != 3 {
			t.Fatalf("loader calls = %d, want 3 (errors not cached)", n)
		}
	})
	t.Run("own TTL", func(t *testing.T) {
		l := countingLoader{err: errNoDevice}
		m := mustMemo(t, l.load, statecache.WithClock(clk),
			statecache.WithTTL(time.Hour), statecache.WithNegativeTTL(5*time.Second))
		for range 3 {
			if _, err := m.Get(context.Background(), "sdz"); !errors.Is(err, errNoDevice) {
				t.Fatalf("err = %v, want %v", err, errNoDevice)
			}
		}
		if n := l.count("sdz"); n != 1 {
			t.Fatalf("loader calls = %d, want 1", n)
		}
		clk.Step(5*time.Second + 1)
		l.mu.Lock()
		l.err = nil
		l.mu.Unlock()
		mustGet(t, m, "sdz", "sdz#2")
	})
	t.Run("context errors never cached", func(t *testing.T) {
		calls := 0
		m := mustMemo(t, func(ctx context.Context, key string) (string, error) {
			calls++
			if calls == 1 {
				return "", fmt.Errorf("lookup: %w", context.DeadlineExceeded)
			}
			return "ok", nil
		}, statecache.WithClock(clk), statecache.WithNegativeTTL(time.Hour))
		if _, err := m.Get(context.Background(), "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		mustGet(t, m, "k", "ok")
	})
}

func TestMemoSizeBoundEvictsLeastRecentlyUsed(t *testing.T) {
	var l countingLoader
	m := mustMemo(t, l.load, statecache.WithMaxEntries(2))
	mustGet(t, m, "a", "a#1")
	mustGet(t, m, "b", "b#1")
	mustGet(t, m, "a", "a#1") // a is now the most recently used
	mustGet(t, m, "c", "c#1") // evicts b
	if n := m.Len(); n != 2 {
		t.Fatalf("Len = %d, want 2", n)
	}
	mustGet(t, m, "a", "a#1")
	mustGet(t, m, "b", "b#2")
}

func TestMemoMergesConcurrentLoads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int64
		m, err := statecache.NewMemo(func(ctx context.Context, key string) (string, error) {
			calls.Add(1)
			<-release
			return "/kubepods/" + key, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		const callers = 50
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				if got, err := m.Get(context.Background(), "pod-1"); err != nil || got != "/kubepods/pod-1" {
					t.Errorf("Get = %q, %v", got, err)
				}
			})
		}
		// Another key is not delayed by pod-1's slow load.
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := m.Get(ctx, "pod-2"); !errors.Is(err, context.Canceled) {
				t.Errorf("pod-2: err = %v", err)
			}
		})
		synctest.Wait() // every caller is blocked on the one load
		close(release)
		wg.Wait()
		if n := calls.Load(); n != 2 {
			t.Fatalf("loader calls = %d, want 2 (one per key)", n)
		}
	})
}

func TestMemoCallerCancelDoesNotFailOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		m, err := statecache.NewMemo(func(ctx context.Context, key string) (string, error) {
			select {
			case <-release:
				return "v", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { _, err := m.Get(ctx, "k"); errc <- err }()
		other := make(chan string, 1)
		go func() { v, _ := m.Get(context.Background(), "k"); other <- v }()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled caller: err = %v", err)
		}
		close(release)
		if v := <-other; v != "v" {
			t.Fatalf("other caller got %q, want v", v)
		}
	})
}

func TestMemoCloseCancelsLoads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := statecache.NewMemo(func(ctx context.Context, key string) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { _, err := m.Get(context.Background(), "k"); errc <- err }()
		synctest.Wait()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("in-flight Get after Close: err = %v", err)
		}
		if _, err := m.Get(context.Background(), "k"); !errors.Is(err, statecache.ErrClosed) {
			t.Fatalf("Get after Close: err = %v, want ErrClosed", err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

func TestMemoLoadTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := statecache.NewMemo(func(ctx context.Context, key string) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}, statecache.WithLoadTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if _, err := m.Get(context.Background(), "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
	})
}

func TestMemoInvalidate(t *testing.T) {
	var l countingLoader
	m := mustMemo(t, l.load)
	mustGet(t, m, "k", "k#1")
	m.Invalidate("k")
	mustGet(t, m, "k", "k#2")
	mustGet(t, m, "k", "k#2")
}

func TestMemoInvalidateDuringLoadDiscardsResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int64
		m, err := statecache.NewMemo(func(ctx context.Context, key string) (string, error) {
			n := calls.Add(1)
			if n == 1 {
				<-release
			}
			return fmt.Sprint("v", n), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		first := make(chan string, 1)
		go func() { v, _ := m.Get(context.Background(), "k"); first <- v }()
		synctest.Wait()
		m.Invalidate("k")
		// A Get after Invalidate does not join the stale load.
		if v, _ := m.Get(context.Background(), "k"); v != "v2" {
			t.Fatalf("Get after Invalidate = %q, want v2", v)
		}
		close(release)
		if v := <-first; v != "v1" {
			t.Fatalf("first Get = %q, want v1", v)
		}
		if v, _ := m.Get(context.Background(), "k"); v != "v2" {
			t.Fatalf("stale load overwrote the cache: got %q, want v2", v)
		}
	})
}

// A panicking loader is the caller's bug: the panic reaches the Get that
// asked, in its own goroutine, unchanged, instead of killing the process
// from the shared load's goroutine; nothing is remembered.
func TestMemoLoaderPanicReachesCaller(t *testing.T) {
	calls := 0
	m := mustMemo(t, func(ctx context.Context, key string) (string, error) {
		calls++
		panic("boom")
	})
	for i := range 2 {
		got := func() (p any) {
			defer func() { p = recover() }()
			_, _ = m.Get(context.Background(), "k")
			return nil
		}()
		if got != "boom" {
			t.Fatalf("Get %d: recovered %v, want the loader's panic value", i, got)
		}
	}
	if calls != 2 || m.Len() != 0 {
		t.Fatalf("loader called %d times, %d remembered: a panic must not be cached", calls, m.Len())
	}
}

func TestNewMemoInvalidOptions(t *testing.T) {
	var l countingLoader
	cases := map[string][]statecache.MemoOption{
		"zero TTL":             {statecache.WithTTL(0)},
		"negative neg TTL":     {statecache.WithNegativeTTL(-1)},
		"negative timeout":     {statecache.WithLoadTimeout(-time.Second)},
		"nil clock":            {statecache.WithClock(nil)},
		"negative max entries": {statecache.WithMaxEntries(-5)},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			var ce *statecache.ConfigError
			if _, err := statecache.NewMemo(l.load, opts...); !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *ConfigError", err)
			}
		})
	}
	// A count limit of 0 is unlimited, not refused (TestMisuseMemoOptions
	// checks that it holds more than the default bound).
	if unlimited, err := statecache.NewMemo(l.load, statecache.WithMaxEntries(0)); err != nil {
		t.Fatalf("WithMaxEntries(0): %v", err)
	} else if err := unlimited.Close(); err != nil {
		t.Fatal(err)
	}
	var ce *statecache.ConfigError
	if _, err := statecache.NewMemo[string, string](nil); !errors.As(err, &ce) || ce.Option != "load" {
		t.Fatalf("nil loader: err = %v", err)
	}
	m := mustMemo(t, l.load)
	var ae *statecache.ArgError
	var nilCtx context.Context
	if _, err := m.Get(nilCtx, "k"); !errors.As(err, &ae) || ae.Arg != "ctx" {
		t.Fatalf("nil ctx: err = %v", err)
	}
}
