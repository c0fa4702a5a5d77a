package runtimeview

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/syncpod/syncpod/internal/backoff"
	"github.com/syncpod/syncpod/internal/crifilter"
	"github.com/syncpod/syncpod/internal/eventstream"
	"github.com/syncpod/syncpod/internal/typednil"
	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Source is the part of the CRI runtime service the view reads, with
// exactly the signatures of k8s.io/cri-api/pkg/apis.RuntimeService, so
// criclient.Client, cri-client and cri-api's fakes all fit.
type Source interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	GetContainerEvents(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

// View is a local, snapshot-consistent copy of a runtime's pod sandboxes
// and containers, fed by one event stream and a periodic relist, that fans
// the events out to any number of subscribers. It is safe for concurrent
// use. Create it with New; release it with Close.
type View struct {
	src Source
	cfg config
	log *zap.Logger

	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stream *eventstream.Reader
	relist chan struct{} // a relist is wanted now
	// confirmSlots bounds the status calls confirming mutations.
	confirmSlots chan struct{}

	mu           sync.Mutex
	closed       bool
	sandboxes    map[string]entry[*runtimeapi.PodSandbox]
	containers   map[string]entry[*runtimeapi.Container]
	ticks        tick          // logical clock ordering observations and mutations
	tombs        map[key]tick  // removed objects, until a relist started after their removal
	dirty        map[key]tick  // mutations not yet confirmed, by when they were reported
	synced       chan struct{} // closed at the first successful relist
	syncedAt     time.Time     // start of the last successful relist
	lastErr      error         // of the last failed relist (nil after a success)
	updated      chan struct{} // closed and replaced when dirty shrinks or a relist ends
	subs         map[*Subscription]struct{}
	upstreamOpen bool // the runtime's event stream is open
	stats        Stats
}

type entry[T any] struct {
	item T
	seen tick // when the runtime was observed in this state
}

// tick is a logical time: every observation of the runtime (relist or
// status call start, event) and every reported mutation takes the next one,
// so their order is exact even when the clock does not move.
type tick uint64

func (v *View) nextLocked() tick {
	v.ticks++
	return v.ticks
}

type kind int

const (
	kindSandbox kind = iota
	kindContainer
)

type key struct {
	kind kind
	id   string
}

// Stats counts what the view did, for tests and metrics.
type Stats struct {
	// Relists and RelistErrors count full relists and the failed ones.
	Relists, RelistErrors int
	// Events counts events received from the runtime.
	Events int
	// StatusCalls counts point refreshes made to confirm mutations.
	StatusCalls int
	// Overflows counts subscriptions ended by ErrOverflow.
	Overflows int
	// StreamBreaks counts upstream event streams that ended.
	StreamBreaks int
	// Subscribers is the number of open subscriptions.
	Subscribers int
}

// New starts a view of src: a relist now and every relist period, and one
// event subscription (re-opened with back-off when it breaks). Close stops
// both. A nil src, a nil Option or an option given an invalid value makes
// it fail with a *ConfigError, before anything starts.
func New(src Source, opts ...Option) (*View, error) {
	if typednil.Is(src) {
		return nil, &ConfigError{Option: "src", Reason: "must not be nil"}
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	v := &View{
		src:          guarded{src},
		cfg:          cfg,
		log:          cfg.logger,
		relist:       make(chan struct{}, 1),
		confirmSlots: make(chan struct{}, maxConfirms),
		sandboxes:    map[string]entry[*runtimeapi.PodSandbox]{},
		containers:   map[string]entry[*runtimeapi.Container]{},
		tombs:        map[key]tick{},
		dirty:        map[key]tick{},
		synced:       make(chan struct{}),
		updated:      make(chan struct{}),
		subs:         map[*Subscription]struct{}{},
	}
	v.life, v.cancel = context.WithCancel(context.Background())
	stream, err := eventstream.Start(v.life, eventstream.Config{
		Source:    v.src,
		Clock:     cfg.clock,
		BackOff:   backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second},
		Jitter:    0.2,
		Buffer:    128,
		OnConnect: v.streamOpened,
		OnEvent:   v.apply,
		OnEnd:     v.streamEnded,
	})
	if err != nil {
		v.cancel()
		return nil, &ConfigError{Option: "src", Reason: err.Error()}
	}
	v.stream = stream
	v.wg.Add(1)
	go v.relistLoop()
	return v, nil
}

// Close stops the relists and the event stream, ends every subscription
// with ErrClosed and waits for the view's goroutines. It is idempotent and
// returns nil.
func (v *View) Close() error {
	v.mu.Lock()
	if !v.closed {
		v.closed = true
		for s := range v.subs {
			v.endLocked(s, ErrClosed)
		}
	}
	v.mu.Unlock()
	v.cancel()
	err := v.stream.Close()
	v.wg.Wait()
	return err
}

// Stats returns a copy of the view's counters.
func (v *View) Stats() Stats {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.stats
	st.Subscribers = len(v.subs)
	return st
}

// Health returns nil when the view's data is within the staleness bound,
// else a *StaleError saying how old it is and why the runtime did not
// answer.
func (v *View) Health() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return ErrClosed
	}
	return v.freshLocked(v.cfg.clock.Now())
}

func (v *View) freshLocked(now time.Time) error {
	if v.syncedAt.IsZero() {
		return &StaleError{Bound: v.cfg.maxStaleness, LastErr: v.lastErr}
	}
	if age := now.Sub(v.syncedAt); age > v.cfg.maxStaleness {
		return &StaleError{Age: age, Bound: v.cfg.maxStaleness, LastErr: v.lastErr}
	}
	return nil
}

// ListPodSandbox answers from the view, with the filter applied as
// containerd applies it. See the package documentation for what the answer
// is guaranteed to contain. The items are shared: do not modify them.
//
// It fails with ErrClosed after Close, an *ArgError for a nil ctx, a
// *StaleError (codes.Unavailable) when the data is too old (unless
// WithStaleReads), and, when ctx
// ends while it waits, an error that unwraps to ctx.Err() with the gRPC
// code Canceled or DeadlineExceeded.
func (v *View) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if err := v.ready(ctx, "ListPodSandbox"); err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	// The filter is applied as containerd applies it (internal/crifilter):
	// an unknown or ambiguous Id matches nothing.
	id, ok := crifilter.ResolveKey(filter.GetId(), v.sandboxes)
	if !ok {
		return []*runtimeapi.PodSandbox{}, nil
	}
	out := make([]*runtimeapi.PodSandbox, 0, len(v.sandboxes))
	for _, e := range v.sandboxes {
		if crifilter.MatchSandbox(filter, id, crifilter.SandboxOf(e.item)) {
			out = append(out, e.item)
		}
	}
	return out, nil
}

// ListContainers answers from the view, with the filter applied as
// containerd applies it. The items are shared: do not modify them. It
// fails as ListPodSandbox does.
func (v *View) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if err := v.ready(ctx, "ListContainers"); err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	// An unknown or ambiguous Id or PodSandboxId matches nothing; the
	// PodSandboxId is resolved against the view's sandboxes.
	id, ok := crifilter.ResolveKey(filter.GetId(), v.containers)
	if !ok {
		return []*runtimeapi.Container{}, nil
	}
	sandboxID, ok := crifilter.ResolveKey(filter.GetPodSandboxId(), v.sandboxes)
	if !ok {
		return []*runtimeapi.Container{}, nil
	}
	out := make([]*runtimeapi.Container, 0, len(v.containers))
	for _, e := range v.containers {
		if crifilter.MatchContainer(filter, id, sandboxID, crifilter.ContainerOf(e.item)) {
			out = append(out, e.item)
		}
	}
	return out, nil
}

// ready waits for the first sync and for every mutation reported before
// the call began to be confirmed, then checks the staleness bound.
func (v *View) ready(ctx context.Context, method string) error {
	if ctx == nil {
		return nilCtx(method)
	}
	v.mu.Lock()
	begun := v.ticks
	v.mu.Unlock()
	select {
	case <-v.synced:
	case <-ctx.Done():
		v.mu.Lock()
		err := v.freshLocked(v.cfg.clock.Now())
		v.mu.Unlock()
		return newContextError(ctx, method+": waiting for the first relist", err)
	case <-v.life.Done():
		return fmt.Errorf("runtimeview: %s: %w", method, ErrClosed)
	}
	for {
		v.mu.Lock()
		if v.closed {
			v.mu.Unlock()
			return fmt.Errorf("runtimeview: %s: %w", method, ErrClosed)
		}
		pending := false
		for _, at := range v.dirty {
			if at <= begun {
				pending = true
				break
			}
		}
		if !pending {
			err := v.freshLocked(v.cfg.clock.Now())
			v.mu.Unlock()
			if err != nil && !v.cfg.staleReads {
				return fmt.Errorf("runtimeview: %s: %w", method, err)
			}
			return nil
		}
		// A confirmation that cannot finish while the runtime does not
		// answer must not hold the read past the staleness bound.
		if err := v.freshLocked(v.cfg.clock.Now()); err != nil {
			v.mu.Unlock()
			if v.cfg.staleReads {
				return nil
			}
			return fmt.Errorf("runtimeview: %s: waiting for a mutation to be confirmed: %w", method, err)
		}
		updated := v.updated
		v.mu.Unlock()
		select {
		case <-updated:
		case <-ctx.Done():
			return newContextError(ctx, method+": waiting for a mutation to be confirmed", nil)
		case <-v.life.Done():
			return fmt.Errorf("runtimeview: %s: %w", method, ErrClosed)
		}
	}
}

func (v *View) broadcastLocked() {
	close(v.updated)
	v.updated = make(chan struct{})
}

func (v *View) requestRelist() {
	select {
	case v.relist <- struct{}{}:
	default:
	}
}
