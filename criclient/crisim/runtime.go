package crisim

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Runtime is the simulated runtime: its state, its fault and latency model
// and its counters. It implements the CRI gRPC services; serve it with Start
// (or register it on your own grpc.Server with Register). All methods are
// safe for concurrent use.
//
// Use New or Start: a Runtime they did not make (the zero value, or a nil
// *Runtime) holds no state. Its CRI calls, fault methods, ExitContainer and
// WaitSubscribers return an *ArgError (Arg "Runtime"), its counters are
// zero and Close returns nil; it never panics.
type Runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	cfg   *config
	clock clock.WithDelayedExecution
	stats map[string]*methodStats // fixed at New; values are atomic

	rngMu sync.Mutex
	rng   *rand.Rand

	slots     *semaphore.Weighted // WithMaxConcurrency; nil: no cap
	store     *storeLock          // WithStoreLock; nil: off
	downloads *semaphore.Weighted // WithMaxConcurrentDownloads; nil: no cap

	faultMu sync.Mutex
	faults  faultState

	// mu guards the runtime state below. It is held only to read or change
	// state, never while sleeping or calling the clock.
	mu         sync.RWMutex
	sandboxes  map[string]*sandbox
	containers map[string]*container
	names      map[string]string // reserved sandbox and container names -> id
	images     *imageStore
	events     eventHub
	ipSeq      uint32
	startSeq   uint64 // tokens of scripted-exit timers

	execHandler atomic.Pointer[ExecHandler] // SetExecHandler; nil: exit 0

	closeOnce sync.Once
	done      chan struct{}
}

var (
	_ runtimeapi.RuntimeServiceServer = (*Runtime)(nil)
	_ runtimeapi.ImageServiceServer   = (*Runtime)(nil)
)

// New returns a Runtime configured by opts, or a *ConfigError for the first
// option it cannot use. It starts no goroutines; Close stops its timers.
func New(opts ...Option) (*Runtime, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(cfg)
		}
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	r := &Runtime{
		cfg:        cfg,
		clock:      cfg.clock,
		stats:      newStats(),
		rng:        rand.New(rand.NewPCG(uint64(cfg.seed), uint64(cfg.seed)^0x9e3779b97f4a7c15)),
		sandboxes:  map[string]*sandbox{},
		containers: map[string]*container{},
		names:      map[string]string{},
		images:     newImageStore(cfg),
		done:       make(chan struct{}),
	}
	r.faults.init()
	r.events.init(cfg.eventBuffer)
	if cfg.maxConcurrency > 0 {
		r.slots = semaphore.NewWeighted(int64(cfg.maxConcurrency))
	}
	if cfg.storeLock {
		r.store = &storeLock{}
	}
	if cfg.maxDownloads > 0 {
		r.downloads = semaphore.NewWeighted(int64(cfg.maxDownloads))
	}
	return r, nil
}

// Close stops the runtime: calls in progress or waiting (hangs, stalls,
// queues) return codes.Unavailable, event streams end, scripted exits are
// cancelled and later calls fail with codes.Unavailable. Idempotent.
func (r *Runtime) Close() error {
	if !r.ready() {
		return nil
	}
	r.closeOnce.Do(func() {
		close(r.done)
		r.mu.Lock()
		var timers []clock.Timer
		for _, c := range r.containers {
			if c.exitTimer != nil {
				timers = append(timers, c.exitTimer)
				c.exitTimer = nil
			}
		}
		r.mu.Unlock()
		// Stop outside r.mu: a fake clock runs timer callbacks under its own
		// lock, and those callbacks take r.mu.
		for _, t := range timers {
			t.Stop()
		}
	})
	return nil
}

// ready reports whether r was made by New.
func (r *Runtime) ready() bool { return r != nil && r.cfg != nil }

func (r *Runtime) closed() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// callKind says how a method takes part in the concurrency and store-lock
// models.
type callKind int

const (
	kindRead     callKind = iota // status calls: concurrency cap only
	kindMutation                 // sandbox/container mutations: store lock (shared by mutations)
	kindList                     // ListPodSandbox/ListContainers: store lock (shared by Lists)
	kindStream                   // GetContainerEvents: faults only
)

// admission is a call admitted by admit. leave must be called once when the
// call ends; releaseSlots may be called earlier to give back the concurrency
// slot and store lock (PullImage does, before downloading).
type admission struct {
	r     *Runtime
	st    *methodStats
	slot  bool
	group lockGroup
	lock  bool
}

func (a *admission) releaseSlots() {
	if a.lock {
		a.r.store.release()
		a.lock = false
	}
	if a.slot {
		a.r.slots.Release(1)
		a.slot = false
	}
}

func (a *admission) leave() {
	a.releaseSlots()
	a.st.inflight.Add(-1)
}

// admit runs a call through the model, in this order: count it; refuse it if
// the runtime is closed; wait out a stall; hang it if HangNext asked to; fail
// it if FailNext or SetErrorRate asked to; take a concurrency slot; take the
// store lock; sleep the method's latency. No lock of the runtime state is
// held while waiting.
func (r *Runtime) admit(ctx context.Context, method string, kind callKind) (*admission, error) {
	if !r.ready() {
		return nil, errNotNew(method)
	}
	st := r.stat(method)
	st.calls.Add(1)
	st.enter()
	a := &admission{r: r, st: st}
	fail := func(err error) (*admission, error) {
		a.leave()
		return nil, err
	}
	if r.closed() {
		return fail(errClosed(method))
	}
	// A nil ctx would panic in the first wait below, and only when the model
	// makes the call wait, so it is refused whatever the configuration.
	if ctx == nil {
		return fail(errInvalid(method, "nil context"))
	}
	if err := r.waitStall(ctx, method); err != nil {
		return fail(err)
	}
	if err := r.injected(ctx, method); err != nil {
		return fail(err)
	}
	if kind == kindStream {
		return a, nil
	}
	if r.slots != nil {
		if err := r.slots.Acquire(ctx, 1); err != nil {
			return fail(contextError(method, err))
		}
		a.slot = true
	}
	if r.store != nil && (kind == kindMutation || kind == kindList) {
		g := groupMutation
		if kind == kindList {
			g = groupList
		}
		if err := r.store.acquire(ctx, g); err != nil {
			return fail(contextError(method, err))
		}
		a.lock, a.group = true, g
	}
	if err := r.sleep(ctx, method, r.latency(method)); err != nil {
		return fail(err)
	}
	// The metadata write is done: runc's CPU work that follows does not
	// hold containerd's store, so a List waits for writes, not for
	// process starts (it competes with them for the cores instead).
	if a.lock && r.cfg.cpu != nil && r.cfg.cpu.work[method] > 0 && kind == kindMutation {
		r.store.release()
		a.lock = false
	}
	if err := r.cpuWork(ctx, method); err != nil {
		return fail(err)
	}
	return a, nil
}

// serve runs fn as the body of a CRI call admitted by admit.
func serve[T any](ctx context.Context, r *Runtime, method string, kind callKind, fn func() (T, error)) (T, error) {
	a, err := r.admit(ctx, method, kind)
	if err != nil {
		var zero T
		return zero, err
	}
	defer a.leave()
	if r.closed() {
		var zero T
		return zero, errClosed(method)
	}
	return fn()
}

func (r *Runtime) latency(method string) time.Duration {
	l := r.cfg.latencies[method]
	if l == nil {
		return 0
	}
	r.rngMu.Lock()
	d := l.Sample(r.rng)
	r.rngMu.Unlock()
	return d
}

// sleep waits d on the runtime clock, or until ctx ends or the runtime closes.
func (r *Runtime) sleep(ctx context.Context, method string, d time.Duration) error {
	return r.sleepOrWake(ctx, method, d, nil)
}

// sleepOrWake is sleep that also returns (nil) early when wake fires, for
// waits whose end can move (a stall extended, a CPU share changed).
func (r *Runtime) sleepOrWake(ctx context.Context, method string, d time.Duration, wake <-chan struct{}) error {
	if d <= 0 {
		return nil
	}
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return contextError(method, ctx.Err())
	case <-r.done:
		return errClosed(method)
	}
}

func (r *Runtime) random() float64 {
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	return r.rng.Float64()
}

// newID returns a 64-hex-digit id, like containerd's, from the seeded source.
func (r *Runtime) newID() string {
	var b [32]byte
	r.rngMu.Lock()
	for i := 0; i < len(b); i += 8 {
		v := r.rng.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	r.rngMu.Unlock()
	return hex.EncodeToString(b[:])
}
