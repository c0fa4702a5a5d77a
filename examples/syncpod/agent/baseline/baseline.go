package baseline

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Pod is one pod's sync as the agent carries it out; [Syncer.Sync] calls
// its methods in the kubelet's order, from the pod's worker.
type Pod interface {
	// WaitStatus blocks until the pod's cached runtime status is newer
	// than since, or ctx ends.
	WaitStatus(ctx context.Context, since time.Time) error
	// Plan computes the pod's actions from that status. done ends the
	// sync there, with err (a sandbox to replace, a finished pod stopped).
	Plan(ctx context.Context) (p Plan, done bool, err error)
	// CreateSandbox creates the pod's sandbox; an error ends the sync.
	CreateSandbox(ctx context.Context) error
	// Kill stops the containers the plan kills.
	Kill(ctx context.Context) error
	// Pull pulls the image of the container that s starts, blocking.
	Pull(ctx context.Context, s Step) error
	// Start creates and starts the container that s names.
	Start(ctx context.Context, s Step) error
	// Done records the sync's outcome (err, nil on success; ctx is the
	// sync's) and returns how long until the pod is synced again if
	// nothing wakes it.
	Done(ctx context.Context, err error) time.Duration
}

// Plan is what a sync does, as Pod.Plan computed it.
type Plan struct {
	// CreateSandbox: the pod needs a new sandbox.
	CreateSandbox bool
	// Init is the number of init containers to start; only the first is
	// started by this sync.
	Init int
	// Start is the number of regular containers to start, in order.
	Start int
}

// Step names one container start of a Plan.
type Step struct {
	// Init tells an init container from a regular one.
	Init bool
	// Index is the start's position in the Plan's init or regular starts.
	Index int
}

// Syncer runs baseline syncs and keeps, per pod, when its last sync ended.
// Use New; its methods are safe for concurrent use (one Sync of a pod at a
// time, as its worker makes them).
type Syncer struct {
	clock clock.PassiveClock

	mu   sync.Mutex
	last map[types.UID]time.Time
}

// New returns a Syncer that reads time from clk (the real clock if nil).
func New(clk clock.PassiveClock) *Syncer {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Syncer{clock: clk, last: map[types.UID]time.Time{}}
}

// Sync is one sync of pod uid, carried out by p. It returns when to sync
// again if nothing wakes the pod (0: only on a wake) and the sync's error.
func (s *Syncer) Sync(ctx context.Context, uid types.UID, p Pod) (time.Duration, error) {
	s.mu.Lock()
	last := s.last[uid]
	s.mu.Unlock()
	err := p.WaitStatus(ctx, last)
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	defer func() {
		s.mu.Lock()
		s.last[uid] = s.clock.Now()
		s.mu.Unlock()
	}()
	if err != nil {
		return 0, err
	}
	plan, done, err := p.Plan(ctx)
	if done {
		return 0, err
	}
	if plan.CreateSandbox {
		if err := p.CreateSandbox(ctx); err != nil {
			return 0, err
		}
	}
	var errs []error
	if err := p.Kill(ctx); err != nil {
		errs = append(errs, err)
	}
	start := func(st Step) error {
		if err := p.Pull(ctx, st); err != nil {
			return err
		}
		return p.Start(ctx, st)
	}
	if plan.Init > 0 {
		if err := start(Step{Init: true}); err != nil {
			errs = append(errs, err)
		}
	} else {
		for i := range plan.Start {
			if ctx.Err() != nil {
				break
			}
			if err := start(Step{Index: i}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	err = errors.Join(errs...)
	return p.Done(ctx, err), err
}

// Forget drops what the Syncer keeps of pod uid.
func (s *Syncer) Forget(uid types.UID) {
	s.mu.Lock()
	delete(s.last, uid)
	s.mu.Unlock()
}

// Len is the number of pods the Syncer keeps something of.
func (s *Syncer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.last)
}
