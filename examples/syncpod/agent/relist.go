package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// relister is the generic PLEG: list everything, diff against the last
// list, inspect the pods that changed (serially, as the kubelet does),
// write their statuses to the cache with the list's timestamp, wake their
// workers, then advance the cache's global time.
type relister struct {
	runtime   *runtimeLayer
	clock     clock.WithTickerAndDelayedExecution
	log       *zap.Logger
	period    func() time.Duration
	threshold time.Duration
	cache     statusStore // may be nil: then only wakes are sent
	inspector *inspector
	wake      func(types.UID)
	observe   func(d time.Duration, err error)

	trigger chan struct{}
	active  *activity // counts the pending or running relist

	mu          sync.Mutex
	lastSuccess time.Time // start time of the last successful relist
	succeeded   bool
	maxDuration time.Duration
	old         map[string]relistEntry
	reinspect   map[types.UID]bool
}

type relistEntry struct {
	uid   types.UID
	state containerState
}

func newRelister(rt *runtimeLayer, clk clock.WithTickerAndDelayedExecution, log *zap.Logger, in *inspector,
	period func() time.Duration, threshold time.Duration, cache statusStore, wake func(types.UID), observe func(time.Duration, error)) *relister {
	return &relister{runtime: rt, clock: clk, log: log, period: period, threshold: threshold, cache: cache,
		inspector: in, wake: wake, observe: observe, trigger: make(chan struct{}, 1),
		old: map[string]relistEntry{}, reinspect: map[types.UID]bool{}}
}

// run relists on every kick (the agent's Start kicks the first one) and a
// period after each relist, until ctx is done. The period's timer kicks
// too, so a relist is counted in active from the moment it is due.
func (r *relister) run(ctx context.Context) {
	var next clock.Timer
	defer func() {
		if next != nil {
			next.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.trigger:
		}
		if next != nil {
			next.Stop()
		}
		r.relist(ctx)
		next = r.clock.AfterFunc(r.period(), r.kick)
		r.active.add(-1) // after the next relist is armed
	}
}

// kick asks for a relist now.
func (r *relister) kick() {
	r.active.add(1)
	select {
	case r.trigger <- struct{}{}:
	default:
		r.active.add(-1) // one is pending already
	}
}

func (r *relister) relist(ctx context.Context) {
	start := r.clock.Now()
	err := r.relistOnce(ctx, start)
	d := r.clock.Since(start)
	r.mu.Lock()
	if d > r.maxDuration {
		r.maxDuration = d
	}
	if err == nil {
		r.lastSuccess, r.succeeded = start, true
	}
	r.mu.Unlock()
	if r.observe != nil {
		r.observe(d, err)
	}
	if err != nil && ctx.Err() == nil {
		r.log.Warn("relist failed", zap.Error(err))
	}
}

func (r *relister) relistOnce(ctx context.Context, ts time.Time) error {
	sel := map[string]string{managedLabel: "true"}
	sbs, err := r.runtime.sandboxes(ctx, sel)
	if err != nil {
		return fmt.Errorf("relist: ListPodSandbox: %w", err)
	}
	cs, err := r.runtime.containers(ctx, sel)
	if err != nil {
		return fmt.Errorf("relist: ListContainers: %w", err)
	}
	cur := make(map[string]relistEntry, len(sbs)+len(cs))
	present := map[types.UID]bool{}
	for _, sb := range sbs {
		uid := types.UID(sb.GetMetadata().GetUid())
		st := stateExited
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			st = stateRunning
		}
		cur[sb.Id] = relistEntry{uid, st}
		present[uid] = true
	}
	for _, c := range cs {
		uid := types.UID(c.Labels[labelPodUID])
		st := stateUnknown
		switch c.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			st = stateRunning
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			st = stateExited
		}
		cur[c.Id] = relistEntry{uid, st}
		present[uid] = true
	}
	r.mu.Lock()
	changed := map[types.UID]bool{}
	for uid := range r.reinspect {
		changed[uid] = true
	}
	for id, e := range cur {
		if o, ok := r.old[id]; !ok || o.state != e.state {
			changed[e.uid] = true
		}
	}
	for id, o := range r.old {
		if _, ok := cur[id]; !ok {
			changed[o.uid] = true
		}
	}
	r.mu.Unlock()

	failed := map[types.UID]bool{}
	for uid := range changed {
		if r.cache != nil {
			if !present[uid] {
				r.cache.Delete(uid)
			} else if st, err := r.inspector.inspect(ctx, uid); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r.cache.Set(uid, nil, err, ts)
				failed[uid] = true
				continue
			} else {
				r.cache.Set(uid, st, nil, ts)
			}
		}
		r.wake(uid)
	}
	r.mu.Lock()
	// Keep the old record of pods whose inspection failed, so their events
	// are computed again next time.
	for id, o := range r.old {
		if failed[o.uid] {
			cur[id] = o
		}
	}
	r.old = cur
	r.reinspect = failed
	r.mu.Unlock()
	if r.cache != nil {
		r.cache.UpdateTime(ts)
	}
	return nil
}

// healthy is the kubelet's PLEG health: a successful relist started within
// the threshold.
func (r *relister) healthy() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.succeeded {
		return false, errors.New("pleg has yet to be successful")
	}
	if since := r.clock.Since(r.lastSuccess); since > r.threshold {
		return false, fmt.Errorf("pleg was last seen active %v ago; threshold is %v", since.Round(time.Millisecond), r.threshold)
	}
	return true, nil
}

func (r *relister) maxRelist() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxDuration
}
