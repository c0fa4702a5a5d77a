package shim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/runtimeview"
)

var (
	_ runtimeapi.RuntimeServiceServer = (*Shim)(nil)
	_ runtimeapi.ImageServiceServer   = (*Shim)(nil)
)

// ErrDraining is returned (as codes.Unavailable) for calls that arrive
// while the shim shuts down.
var ErrDraining = errors.New("crishim: shutting down")

// Config is the shim's configuration. The zero value passes everything
// through except List calls, which are answered from the view.
type Config struct {
	// Limits per admission class.
	Limits [numClasses]Limits
	// PassthroughLists sends ListPodSandbox and ListContainers to the
	// runtime instead of answering them from the view.
	PassthroughLists bool
	// RelistPeriod and MaxStaleness configure the view (runtimeview
	// defaults when zero; New fails with the view's
	// *runtimeview.ConfigError when negative).
	RelistPeriod, MaxStaleness time.Duration
	// FailStaleReads makes Lists and status reads fail with UNAVAILABLE
	// once the view is older than MaxStaleness. By default they are
	// answered from the last view while Status and Health say the runtime
	// does not answer (see the package documentation).
	FailStaleReads bool
	// EventBuffer is each GetContainerEvents subscriber's buffer
	// (runtimeview.DefaultBuffer when zero).
	EventBuffer int
	// AsyncRunPodSandbox makes RunPodSandbox return once validated and
	// queued; see the package documentation.
	AsyncRunPodSandbox bool
	// AsyncWorkers is how many queued RunPodSandbox calls run at once
	// (default 8); they also pass the mutating class's admission.
	AsyncWorkers int
	// AsyncQueue bounds the accepted calls not yet started (default 256);
	// a full queue makes RunPodSandbox wait for room.
	AsyncQueue int
	// Logger (default zap.NewNop()). Requests are never logged, so
	// registry credentials cannot leak into the log.
	Logger *zap.Logger
	// WriteWait bounds how long a read waits for the runtime's event of a
	// mutation made through the shim before falling back to a status call
	// (DefaultWriteWait when zero or negative). containerd sends the event
	// before or just after it answers the mutation, so reads rarely wait.
	WriteWait time.Duration
	// Clock drives the view's relists and bounds and the shim's own
	// timers (default the real clock); tests pass a fake one.
	Clock clock.WithTicker
}

// Shim is a CRI server that forwards to a backend runtime: a drop-in
// endpoint for the kubelet. Create it with New, serve it with Register on
// a grpc.Server, stop it with Drain and Close.
type Shim struct {
	runtimeapi.UnsafeRuntimeServiceServer
	runtimeapi.UnsafeImageServiceServer

	cfg      Config
	log      *zap.Logger
	rt       runtimeapi.RuntimeServiceClient
	img      runtimeapi.ImageServiceClient
	client   *criclient.Client // feeds the view; rt and img are its raw clients
	view     *runtimeview.View
	statuses *statuses
	// lastStatus is the runtime's last answer to a non-verbose Status.
	lastStatus atomic.Pointer[runtimeapi.StatusResponse]
	// lastVersion is the runtime's last answer to Version.
	lastVersion atomic.Pointer[runtimeapi.VersionResponse]
	// bound is the view's staleness bound, which also bounds the wait
	// for the runtime's Status and Version.
	bound time.Duration
	gates [numClasses]*criclient.Gate
	async *asyncSandboxes // nil unless AsyncRunPodSandbox
	// runs holds the synchronous modes' RunPodSandbox calls at the
	// runtime and the sandboxes kept for a retry (nil in async mode).
	runs *sandboxRuns
	// abandoned hides the containers of CreateContainer calls whose
	// caller gave up while the runtime had them.
	abandoned abandoned
	// lateUndone counts the containers removed because the runtime
	// created them after their caller gave up.
	lateUndone atomic.Uint64
	// waits measures what reads answered from the view wait for.
	waits     readWaits
	drain     chan struct{} // closed by Drain: streams end, new calls fail
	drainOnce sync.Once
	closeOnce sync.Once
}

// New connects to the backend at endpoint ("unix:///path") and starts the
// view. It does not wait for the backend: a backend that is down shows up
// as errors and in Health. An invalid Config makes it fail, with nothing
// left running.
func New(ctx context.Context, endpoint string, cfg Config) (*Shim, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.WriteWait <= 0 {
		cfg.WriteWait = DefaultWriteWait
	}
	s := &Shim{cfg: cfg, log: cfg.Logger, drain: make(chan struct{}), bound: runtimeview.DefaultMaxStaleness}
	if cfg.MaxStaleness > 0 {
		s.bound = cfg.MaxStaleness
	}
	for c := range s.gates {
		g, err := criclient.NewGate(cfg.Limits[c], nil)
		if err != nil {
			return nil, err
		}
		s.gates[c] = g
	}
	target, err := unixTarget(endpoint)
	if err != nil {
		return nil, err
	}
	// One connection serves the view and the forwarded calls, so when the
	// view has relisted after a backend restart, forwarded calls reach the
	// backend too instead of failing on a second connection still backing off.
	s.client, err = criclient.Dial(ctx, target, criclient.WithoutVersionCheck(), criclient.WithLogger(cfg.Logger.Named("view")))
	if err != nil {
		return nil, fmt.Errorf("crishim: backend %s: %w", endpoint, err)
	}
	s.rt, s.img = s.client.Raw()
	viewOpts := []runtimeview.Option{runtimeview.WithLogger(cfg.Logger.Named("view")), runtimeview.WithClock(cfg.Clock),
		runtimeview.WithStaleReads(!cfg.FailStaleReads)}
	if cfg.RelistPeriod != 0 {
		viewOpts = append(viewOpts, runtimeview.WithRelistPeriod(cfg.RelistPeriod))
	}
	if cfg.MaxStaleness != 0 {
		viewOpts = append(viewOpts, runtimeview.WithMaxStaleness(cfg.MaxStaleness))
	}
	if s.view, err = runtimeview.New(s.client, viewOpts...); err != nil {
		_ = s.client.Close()
		return nil, fmt.Errorf("crishim: %w", err)
	}
	s.statuses = newStatuses(s, cfg.Clock, cfg.WriteWait)
	if cfg.AsyncRunPodSandbox {
		s.async = newAsyncSandboxes(s, max(cfg.AsyncWorkers, 0), cfg.AsyncQueue)
		if err := s.async.recover(ctx); err != nil {
			s.log.Warn("could not rebuild the sandbox id map; it fills as sandboxes are listed", zap.Error(err))
		}
	} else {
		s.runs = newSandboxRuns(s)
	}
	return s, nil
}

// Register registers the shim's RuntimeService and ImageService on srv.
func (s *Shim) Register(srv grpc.ServiceRegistrar) {
	runtimeapi.RegisterRuntimeServiceServer(srv, s)
	runtimeapi.RegisterImageServiceServer(srv, s)
}

// Health reports whether the shim can answer from fresh data: nil, or why
// not (the view's *runtimeview.StaleError wrapping the backend's error).
func (s *Shim) Health() error { return s.view.Health() }

// View returns the shim's view of the runtime (for metrics and tests).
func (s *Shim) View() *runtimeview.View { return s.view }

// Drain makes new calls fail with ErrDraining, ends every event stream, and
// waits (until ctx ends) for the accepted asynchronous RunPodSandbox calls
// to reach the runtime and finish. Call it before grpc.Server.GracefulStop.
func (s *Shim) Drain(ctx context.Context) error {
	s.drainOnce.Do(func() { close(s.drain) })
	if s.async != nil {
		return s.async.wait(ctx)
	}
	return nil
}

// Close stops the view and the async workers, ends the synchronous
// RunPodSandbox calls still at the runtime (after GracefulStop, those
// whose callers gave up: no retry can reach a closed shim) and closes the
// backend connections. Idempotent.
func (s *Shim) Close() error {
	var err error
	s.closeOnce.Do(func() {
		_ = s.Drain(context.Background())
		if s.async != nil {
			s.async.close()
		}
		if s.runs != nil {
			s.runs.close()
		}
		s.statuses.close()
		s.view.Close()
		err = s.client.Close()
	})
	return err
}

func (s *Shim) draining() bool {
	select {
	case <-s.drain:
		return true
	default:
		return false
	}
}

// Stats are the shim's counters since New.
type Stats struct {
	// LateCreatesUndone counts the containers the shim removed because
	// the runtime created them after their CreateContainer's caller had
	// given up (see the package documentation).
	LateCreatesUndone uint64
	// AbandonedCreates is how many CreateContainer calls the runtime has
	// now whose caller gave up: the containers they may create are hidden
	// until the call ends and is undone.
	AbandonedCreates int
	// SandboxRetriesJoined counts the RunPodSandbox calls of the
	// synchronous modes that were not sent because the runtime already
	// had the same sandbox's call (same metadata, config and runtime
	// handler): they joined it, or got the sandbox it created after its
	// caller gave up. Each is a kubelet retry the runtime would have
	// refused with "name is reserved" (see the package documentation).
	SandboxRetriesJoined uint64
	// AbandonedSandboxes is how many RunPodSandbox calls of the
	// synchronous modes the runtime has now whose every caller gave up:
	// the sandbox each creates is kept for the retry.
	AbandonedSandboxes int
	// LateSandboxes is how many sandboxes the runtime created after their
	// RunPodSandbox's caller gave up are kept now for the retry.
	LateSandboxes int
	// WriteWaits counts the reads answered from the view (Lists and
	// status reads) that waited for the event of a mutation made through
	// the shim (read-your-writes); WriteWaitTimeouts those that waited
	// all of Config.WriteWait and handed the mutation to the view.
	// WriteWaitTime and WriteWaitMax are their total and longest wait.
	WriteWaits, WriteWaitTimeouts uint64
	WriteWaitTime, WriteWaitMax   time.Duration
	// UnseenWrites counts, by the mutation's method, the shim-made
	// mutations whose event a read gave up waiting for (StopContainer
	// also stands for the containers a StopPodSandbox stopped).
	UnseenWrites map[string]uint64
	// ViewWaits counts the reads whose answer from the view took more
	// than 10 ms: the view waits for the status calls that confirm a
	// mutation handed to it (runtimeview's read-your-writes).
	// ViewWaitTime and ViewWaitMax are the total and longest time reads
	// spent in the view, all reads counted.
	ViewWaits                 uint64
	ViewWaitTime, ViewWaitMax time.Duration
}

// Stats returns the shim's counters.
func (s *Shim) Stats() Stats {
	st := s.waits.stats()
	st.LateCreatesUndone, st.AbandonedCreates = s.lateUndone.Load(), s.abandoned.count()
	if s.runs != nil {
		st.SandboxRetriesJoined, st.AbandonedSandboxes, st.LateSandboxes = s.runs.stats()
	}
	return st
}

// readWaits accumulates the waits of reads answered from the view.
type readWaits struct {
	mu sync.Mutex
	st Stats
}

func (w *readWaits) wroteWait(d time.Duration, timedOut bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.WriteWaits++
	if timedOut {
		w.st.WriteWaitTimeouts++
	}
	w.st.WriteWaitTime += d
	w.st.WriteWaitMax = max(w.st.WriteWaitMax, d)
}

// slowViewRead is how long a read from the view takes before it counts as
// having waited (ViewWaits).
const slowViewRead = 10 * time.Millisecond

func (w *readWaits) viewWait(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d > slowViewRead {
		w.st.ViewWaits++
	}
	w.st.ViewWaitTime += d
	w.st.ViewWaitMax = max(w.st.ViewWaitMax, d)
}

func (w *readWaits) unseen(method string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.st.UnseenWrites == nil {
		w.st.UnseenWrites = map[string]uint64{}
	}
	w.st.UnseenWrites[method]++
}

func (w *readWaits) stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.st
	st.UnseenWrites = maps.Clone(w.st.UnseenWrites)
	return st
}
