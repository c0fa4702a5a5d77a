package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/pleg"
	"github.com/syncpod/syncpod/statecache"
)

// eventedLifecycle is syncpod mode's status source: the pleg package on
// the runtime's event stream (relisting while it is down) keeps a
// statecache of pleg.PodStatus current, and its events wake the workers.
// Workers read the cache without List calls, which queue behind every
// mutation in flight on a busy runtime.
type eventedLifecycle struct {
	p     *pleg.PLEG
	cache *statecache.Cache[types.UID, *pleg.PodStatus]
	keys  *keyCounter // the pods the PLEG holds a cache entry for
	wake  func(types.UID)
	log   *zap.Logger

	handled atomic.Uint64 // events taken off Watch and passed on as wakes

	mu        sync.Mutex
	maxRelist time.Duration
}

type plegObserver struct {
	l *eventedLifecycle
	m *metrics
}

func (o plegObserver) observe(ob pleg.Observation) {
	switch ob.Kind {
	case pleg.ObservedRelist:
		o.relisted(ob.Relist)
	case pleg.ObservedModeChange:
		o.modeChanged(ob.From, ob.To, ob.Err)
	}
}

func (o plegObserver) relisted(r pleg.RelistResult) {
	o.m.relist.Observe(r.Duration.Seconds())
	o.l.mu.Lock()
	if r.Duration > o.l.maxRelist {
		o.l.maxRelist = r.Duration
	}
	o.l.mu.Unlock()
}

func (o plegObserver) modeChanged(from, to pleg.Mode, cause error) {
	o.l.log.Info("PLEG mode changed", zap.Stringer("from", from), zap.Stringer("to", to), zap.Error(cause))
}

func newEventedLifecycle(a *Agent) (*eventedLifecycle, error) {
	cfg := a.cfg
	l := &eventedLifecycle{cache: statecache.New[types.UID, *pleg.PodStatus](), keys: newKeyCounter(), wake: a.wakeAndReport, log: a.log}
	threshold := cfg.plegThreshold()
	safety := cfg.safetyRelist
	if safety == 0 {
		safety = cfg.scaled(eventedRelistPeriod)
	}
	p, err := pleg.New(a.runtime.runtimeService(), countingPLEGCache{l.cache, l.keys},
		pleg.WithClock(a.clock),
		pleg.WithLogger(a.log),
		pleg.WithRelistPeriod(cfg.scaled(relistPeriod)),
		pleg.WithSafetyNetPeriod(safety),
		pleg.WithThreshold(threshold),
		pleg.WithBackOff(cfg.scaled(250*time.Millisecond), cfg.scaled(5*time.Second)),
		pleg.WithObserver(plegObserver{l: l, m: a.metrics}.observe),
	)
	if err != nil {
		return nil, err
	}
	l.p = p
	return l, nil
}

func (l *eventedLifecycle) run(ctx context.Context) {
	if err := l.p.Start(ctx); err != nil {
		l.log.Error("start PLEG", zap.Error(err))
		return
	}
	defer func() { _ = l.p.Close() }()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-l.p.Watch():
			if !ok {
				return
			}
			l.wake(ev.ID)
			l.handled.Add(1)
		}
	}
}

func (l *eventedLifecycle) status(uid types.UID) (*runtimePodStatus, error) {
	ps, err := l.cache.Get(uid)
	if err != nil {
		return nil, err
	}
	return fromPLEG(uid, ps), nil
}

// drained reports whether every event the PLEG received has been carried
// into its cache and onto the Watch channel, and every one delivered passed
// on to its worker (the PLEG counts an event delivered as it sends it).
func (l *eventedLifecycle) drained() bool {
	st := l.p.Stats()
	return len(l.p.Watch()) == 0 && st.Outbox == 0 && st.Delivered == l.handled.Load()
}

func (l *eventedLifecycle) relistMax() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxRelist
}

// fromPLEG converts the PLEG's CRI statuses to the agent's view. Only
// containers created after the newest sandbox belong to it.
func fromPLEG(uid types.UID, ps *pleg.PodStatus) *runtimePodStatus {
	st := &runtimePodStatus{UID: uid}
	if ps == nil {
		st.index()
		return st
	}
	st.Observed = ps.Timestamp
	// A container status does not name its sandbox: a container belongs
	// to the newest sandbox created before it.
	cands := make([]sandboxCandidate, len(ps.SandboxStatuses))
	for i, sb := range ps.SandboxStatuses {
		cands[i] = sandboxCandidate{id: sb.Id, ready: sb.State == runtimeapi.PodSandboxState_SANDBOX_READY,
			attempt: sb.GetMetadata().GetAttempt(), created: sb.CreatedAt}
	}
	owner := func(created int64) int {
		o := -1
		for i, c := range cands {
			if c.created <= created && (o < 0 || c.created > cands[o].created) {
				o = i
			}
		}
		return o
	}
	owners := make([]int, len(ps.ContainerStatuses))
	for i, c := range ps.ContainerStatuses {
		owners[i] = owner(c.CreatedAt)
		if owners[i] >= 0 && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			cands[owners[i]].running++
		}
	}
	chosen, staleReady, others := pickSandbox(cands)
	if chosen >= 0 {
		st.SandboxID, st.SandboxReady, st.SandboxAttempt = cands[chosen].id, cands[chosen].ready, cands[chosen].attempt
		st.SandboxCreated = time.Unix(0, cands[chosen].created)
		st.SandboxIP = ps.SandboxStatuses[chosen].GetNetwork().GetIp()
		st.OldSandboxes, st.StaleReady = others, staleReady
	}
	for i, c := range ps.ContainerStatuses {
		if st.SandboxID == "" || owners[i] != chosen {
			continue
		}
		s := &containerInstance{
			ID:        c.Id,
			Name:      c.GetMetadata().GetName(),
			Attempt:   c.GetMetadata().GetAttempt(),
			CreatedAt: time.Unix(0, c.CreatedAt),
			Hash:      c.Annotations[annotationHash],
			Runtime:   c,
		}
		switch c.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			s.State = stateRunning
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			s.State = stateExited
			s.ExitCode = c.ExitCode
			s.FinishedAt = time.Unix(0, c.FinishedAt)
		}
		st.Containers = append(st.Containers, s)
	}
	st.index()
	return st
}

// expectations remember what a worker did and has not seen in the status
// yet, so an event-fed cache that lags behind never makes the worker
// create a sandbox or start a container twice (the kubelet's evented PLEG
// bug, kubernetes#121003). They expire, after which a pod relist is asked
// for, and the status is trusted again once it was observed after the
// last action: a slow relist (a loaded runtime) never makes the worker
// act again on a status older than what it did.
type expectations struct {
	mu        sync.Mutex
	sandboxID string
	since     time.Time
	started   map[string]uint32 // container → attempt started
}

// apply folds the expectations into st: a sandbox not seen yet means
// "wait"; containers not seen yet are assumed running (not started again,
// not counted as observed). It clears what st now shows and reports
// whether anything is still pending.
func (e *expectations) apply(st *runtimePodStatus) (waitSandbox, pending bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sandboxID != "" {
		if st.SandboxID != e.sandboxID {
			return true, true
		}
		e.sandboxID = ""
	}
	for name, attempt := range e.started {
		latest := st.Latest(name)
		if latest != nil && (latest.Attempt > attempt || (latest.Attempt == attempt && latest.State != stateUnknown)) {
			delete(e.started, name)
			continue
		}
		pending = true
		assumed := &containerInstance{Name: name, Attempt: attempt, State: stateRunning, Assumed: true}
		st.Containers = append([]*containerInstance{assumed}, st.Containers...)
		st.latest[name] = assumed
	}
	return false, pending
}

func (e *expectations) sandbox(id string, now time.Time) {
	e.mu.Lock()
	e.sandboxID, e.since = id, now
	e.mu.Unlock()
}

func (e *expectations) container(name string, attempt uint32, now time.Time) {
	e.mu.Lock()
	if e.started == nil {
		e.started = map[string]uint32{}
	}
	e.started[name] = attempt
	e.since = now
	e.mu.Unlock()
}

// seenSince reports whether a status observed at t is newer than every
// action the expectations remember: only such a status may overrule them.
func (e *expectations) seenSince(t time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return t.After(e.since)
}

// age is how long the oldest unmet expectation has waited.
func (e *expectations) age(now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return now.Sub(e.since)
}

func (e *expectations) reset() {
	e.mu.Lock()
	e.sandboxID, e.started = "", nil
	e.mu.Unlock()
}

// countingPLEGCache passes the PLEG's writes to the statecache and counts
// the keys present, so churn can show the PLEG's entries going away too.
type countingPLEGCache struct {
	*statecache.Cache[types.UID, *pleg.PodStatus]
	keys *keyCounter
}

var _ pleg.Cache = countingPLEGCache{}

// Set implements pleg.Cache.
func (c countingPLEGCache) Set(key types.UID, v *pleg.PodStatus, err error, ts time.Time) bool {
	ok := c.Cache.Set(key, v, err, ts)
	if ok {
		c.keys.add(key)
	}
	return ok
}

// Delete implements pleg.Cache.
func (c countingPLEGCache) Delete(key types.UID) {
	c.Cache.Delete(key)
	c.keys.remove(key)
}

// outstanding reports whether anything done is not yet seen.
func (e *expectations) outstanding() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sandboxID != "" || len(e.started) > 0
}
