package statecache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/typednil"
)

// Memo remembers the results of a slow, rarely-changing lookup, such as a
// device's major:minor numbers or a pod's cgroup path, for a while.
//
//   - Results live for the TTL (WithTTL), measured on an injectable clock
//     (WithClock), so expiry is testable with a fake clock.
//   - Concurrent Gets of one key that miss share a single loader call
//     (golang.org/x/sync/singleflight); Gets of other keys are not delayed.
//   - Errors are cached only if WithNegativeTTL is set, for that (usually
//     shorter) time. Context errors are never cached.
//   - At most WithMaxEntries results are kept; beyond that the least
//     recently used one is evicted (WithMaxEntries(0): no bound).
//
// Keys are strings (or string types such as types.UID) because merged loads
// are keyed by string: keeping K ~string makes the merge exact, where an
// encoding of arbitrary keys into strings could merge two different keys.
//
// The loader runs with a context that is independent of any one caller, so a
// caller that gives up does not fail the others sharing the call; it is
// cancelled by Close and bounded by WithLoadTimeout.
//
// Hits take one short mutex (the LRU order changes on every hit), which is
// cheap next to the lookups a Memo is for; use Cache for hot state.
//
// A Memo needs NewMemo. One not made by it (its zero value, a nil pointer)
// remembers nothing and starts nothing: Get returns an *ArgError saying to
// use NewMemo, Invalidate does nothing, Len is 0 and Close returns nil.
type Memo[K ~string, V any] struct {
	load Loader[K, V]
	opts memoOptions

	results *cache.LRUExpireCache // K -> memoResult[V]
	group   singleflight.Group

	// epoch counts invalidations; a load that overlaps one does not store
	// its (possibly stale) result. It is incremented only while holding
	// storeLock, and a load checks it and stores while holding storeLock,
	// so no Invalidate can slip between that check and the store.
	epoch atomic.Uint64
	// storeLock is a one-slot channel used as a mutex. A channel rather
	// than a sync.Mutex because a goroutine waiting on it is durably
	// blocked under testing/synctest, which lets tests force Invalidate
	// into a load's store. It is taken only by Invalidate and by a load
	// storing its result, never on the hit path.
	storeLock chan struct{}

	base   context.Context
	cancel context.CancelFunc

	mu     sync.Mutex // guards closed and loads.Add
	closed bool
	loads  sync.WaitGroup

	// beforeStore, if set (by tests), is called with storeLock held
	// after the epoch check and before the store.
	beforeStore func()
}

// Loader looks up the value for key. It must honour ctx.
type Loader[K ~string, V any] func(ctx context.Context, key K) (V, error)

type memoResult[V any] struct {
	value V
	err   error
	// panicked holds what the loader panicked with: Get panics with it
	// again in each caller's goroutine, and nothing is remembered.
	panicked any
}

// NewMemo returns a Memo over load. Defaults: TTL one minute, errors not
// cached, at most 4096 entries, real clock, no load timeout. It returns a
// *ConfigError for a nil loader or an option out of range.
func NewMemo[K ~string, V any](load Loader[K, V], opts ...MemoOption) (*Memo[K, V], error) {
	if load == nil {
		return nil, &ConfigError{Option: "load", Reason: "must not be nil"}
	}
	o := memoOptions{ttl: time.Minute, maxEntries: 4096, clock: clock.RealClock{}}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	bad := func(option, reason string) (*Memo[K, V], error) {
		return nil, &ConfigError{Option: option, Reason: reason}
	}
	switch {
	case o.ttl <= 0:
		return bad("WithTTL", o.ttl.String()+" is not positive")
	case o.negativeTTL < 0:
		return bad("WithNegativeTTL", o.negativeTTL.String()+" is negative")
	case o.maxEntries < 0:
		return bad("WithMaxEntries", fmt.Sprintf("%d is negative", o.maxEntries))
	case o.loadTimeout < 0:
		return bad("WithLoadTimeout", o.loadTimeout.String()+" is negative")
	case o.clock == nil || typednil.Is(o.clock):
		return bad("WithClock", "must not be nil")
	}
	maxEntries := o.maxEntries
	if maxEntries == 0 {
		maxEntries = math.MaxInt // unlimited: the LRU never needs to evict
	}
	base, cancel := context.WithCancel(context.Background())
	return &Memo[K, V]{
		load:      load,
		opts:      o,
		results:   cache.NewLRUExpireCacheWithClock(maxEntries, o.clock),
		storeLock: make(chan struct{}, 1),
		base:      base,
		cancel:    cancel,
	}, nil
}

// Get returns the remembered result for key, or loads it. A loader error is
// returned wrapped, with errors.Is/As reaching the loader's error. If ctx is
// done before the load finishes, Get returns an error wrapping ctx.Err() and
// the load carries on for the other callers and the cache.
func (m *Memo[K, V]) Get(ctx context.Context, key K) (V, error) {
	var zero V
	if ctx == nil {
		return zero, &ArgError{Method: "Memo.Get", Arg: "ctx", Reason: "must not be nil"}
	}
	if !m.made() {
		return zero, &ArgError{Method: "Memo.Get", Arg: "Memo", Reason: "is not initialized: use NewMemo"}
	}
	if m.isClosed() {
		return zero, fmt.Errorf("statecache: Memo.Get(%q): %w", string(key), ErrClosed)
	}
	if r, ok := m.results.Get(key); ok {
		res := r.(memoResult[V])
		return res.value, res.err
	}
	ch := m.group.DoChan(string(key), func() (any, error) {
		return m.loadAndStore(key), nil
	})
	select {
	case r := <-ch:
		res := r.Val.(memoResult[V])
		if res.panicked != nil {
			panic(res.panicked)
		}
		return res.value, res.err
	case <-ctx.Done():
		return zero, fmt.Errorf("statecache: Memo.Get(%q): %w", string(key), ctx.Err())
	}
}

// Invalidate forgets the result for key, so the next Get loads again. A load
// in flight when Invalidate is called does not store its result, and later
// Gets do not join it. Once Invalidate returns, no result loaded before it
// is served. On a Memo not made by NewMemo it does nothing.
func (m *Memo[K, V]) Invalidate(key K) {
	if !m.made() {
		return
	}
	m.storeLock <- struct{}{}
	defer func() { <-m.storeLock }()
	m.epoch.Add(1)
	m.group.Forget(string(key))
	m.results.Remove(key)
}

// Len returns the number of remembered results that have not expired (0
// for a Memo not made by NewMemo).
func (m *Memo[K, V]) Len() int {
	if !m.made() {
		return 0
	}
	return len(m.results.Keys())
}

// Close cancels loads in flight and waits for them to return. Later Gets
// return an error wrapping ErrClosed. Close is idempotent, returns nil,
// and on a Memo not made by NewMemo does nothing.
func (m *Memo[K, V]) Close() error {
	if !m.made() {
		return nil
	}
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.loads.Wait()
	return nil
}

// made reports whether m was made by NewMemo, which is what sets load.
func (m *Memo[K, V]) made() bool { return m != nil && m.load != nil }

func (m *Memo[K, V]) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// loadAndStore runs the loader once for key and remembers the result.
func (m *Memo[K, V]) loadAndStore(key K) (res memoResult[V]) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		res.err = fmt.Errorf("statecache: Memo.Get(%q): %w", string(key), ErrClosed)
		return res
	}
	m.loads.Add(1)
	m.mu.Unlock()
	defer m.loads.Done()

	epoch := m.epoch.Load()
	ctx := m.base
	if m.opts.loadTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.opts.loadTimeout)
		defer cancel()
	}
	res.value, res.panicked, res.err = m.callLoader(ctx, key)
	if res.panicked != nil {
		return res
	}
	if res.err != nil {
		res.err = fmt.Errorf("statecache: Memo.Get(%q): %w", string(key), res.err)
	}
	m.store(key, res, epoch)
	return res
}

// store remembers res for key unless an Invalidate came after the load read
// epoch. The check and the Add happen under storeLock, which Invalidate also
// takes: checked outside it, an Invalidate between the check and the Add
// would be missed and the stale result served for a whole TTL.
func (m *Memo[K, V]) store(key K, res memoResult[V], epoch uint64) {
	ttl := m.opts.ttl
	switch {
	case res.err == nil:
	case m.opts.negativeTTL > 0 && !isContextError(res.err):
		ttl = m.opts.negativeTTL
	default:
		return
	}
	m.storeLock <- struct{}{}
	defer func() { <-m.storeLock }()
	if m.epoch.Load() != epoch {
		return
	}
	if m.beforeStore != nil {
		m.beforeStore()
	}
	m.results.Add(key, res, ttl)
}

// callLoader calls the loader in the shared load's goroutine. A panic
// there would kill the process where nobody can catch it, so it is caught
// and handed to the callers, who panic with it in their own goroutines:
// the loader's bug reaches the code that asked, unchanged.
func (m *Memo[K, V]) callLoader(ctx context.Context, key K) (v V, panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			var zero V
			v, panicked, err = zero, p, nil
		}
	}()
	v, err = m.load(ctx, key)
	return v, nil, err
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// MemoOption configures a Memo.
type MemoOption func(*memoOptions)

type memoOptions struct {
	ttl         time.Duration
	negativeTTL time.Duration
	maxEntries  int
	loadTimeout time.Duration
	clock       clock.PassiveClock
}

// WithTTL sets how long a successful result is remembered (default one
// minute). It must be positive.
func WithTTL(d time.Duration) MemoOption {
	return func(o *memoOptions) { o.ttl = d }
}

// WithNegativeTTL makes the Memo remember loader errors for d, so a failing
// lookup is not retried by every caller. Zero (the default) does not cache
// errors. Context errors are never cached.
func WithNegativeTTL(d time.Duration) MemoOption {
	return func(o *memoOptions) { o.negativeTTL = d }
}

// WithMaxEntries bounds the number of remembered results (default 4096);
// the least recently used is evicted first. 0 means unlimited: results then
// leave only by expiring (an expired result is dropped when its key is next
// looked up) or by Invalidate, so memory grows with the number of distinct
// keys. A negative n is refused.
func WithMaxEntries(n int) MemoOption {
	return func(o *memoOptions) { o.maxEntries = n }
}

// WithLoadTimeout bounds each loader call. Zero (the default) means no bound
// other than Close.
func WithLoadTimeout(d time.Duration) MemoOption {
	return func(o *memoOptions) { o.loadTimeout = d }
}

// WithClock sets the clock that measures TTLs, for example a
// k8s.io/utils/clock/testing fake clock in tests.
func WithClock(c clock.PassiveClock) MemoOption {
	return func(o *memoOptions) { o.clock = c }
}
