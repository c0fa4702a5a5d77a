package pleg

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/backoff"
	"github.com/syncpod/syncpod/internal/eventstream"
	"github.com/syncpod/syncpod/internal/typednil"
)

// PLEG is a pod lifecycle event generator: it watches a CRI runtime, keeps a
// pod status Cache up to date and delivers lifecycle events on Watch(). See
// the package documentation for what it guarantees.
//
// Make one with New. A PLEG not made by New (its zero value, a nil *PLEG)
// is not usable: Start, RequestRelist, Healthy, Subscribe and the waits
// return an *ArgError saying "use New", Watch returns a closed channel,
// Mode and Stats return zero values and Close does nothing.
type PLEG struct {
	rt    Runtime
	cache Cache
	cfg   config
	log   *zap.Logger
	clock clock.Clock
	ch    chan Event
	notes *notifier

	relistMu    sync.Mutex // one full relist at a time
	podRelistMu sync.Mutex // one pod relist at a time
	flushMu     sync.Mutex // one flush at a time; never taken under mu

	mu         sync.Mutex
	pods       map[types.UID]*podRecord
	owner      map[string]types.UID // entity id → pod
	tombstones map[string]tombstone // removed ids
	// listed and listedAt: every id the last successful full relist's
	// List calls returned, and when that relist began; startedAt: when
	// Start was called (staleLocked).
	listed              map[string]struct{}
	listedAt, startedAt time.Time
	seq                 uint64 // observation sequence
	reinspect           map[types.UID]struct{}
	pending             map[types.UID]struct{}
	// lagging: pods whose cache entry fell behind the events delivered
	// (verifyLocked); the write that corrects it delivers a PodSync.
	lagging    map[types.UID]struct{}
	dirty      dirtyQueue   // pods owed a PodSync
	outbox     []outboxItem // cache writes and events to carry out (flush)
	queued     uint64       // outbox items queued since New
	flushed    uint64       // outbox items carried out since New
	waiters    map[*waiter]struct{}
	mode       Mode
	streamUp   bool
	streamGen  uint64 // bumped on every connect
	reconWant  uint64 // bumped on every reconcile request
	reconDone  uint64 // reconWant value the last successful full relist covered
	lastActive time.Time
	active     bool
	relistErr  error
	streamErr  error
	stats      Stats
	subs       map[*Subscription]struct{}
	started    bool
	stopped    bool
	closed     bool

	wakeRelist, wakePods, wakeResync chan struct{}
	cancel                           context.CancelFunc
	wg                               sync.WaitGroup
	stream                           *eventstream.Reader
	closeOnce                        sync.Once
}

// Stats are the PLEG's counters since New.
type Stats struct {
	// Relists and RelistFailures count full relists.
	Relists, RelistFailures uint64
	// PodRelists and PodRelistFailures count relists of a few pods.
	PodRelists, PodRelistFailures uint64
	// Probes and ProbeFailures count evented-mode proofs of life.
	Probes, ProbeFailures uint64
	// Inspections and InspectionFailures count pod status inspections.
	Inspections, InspectionFailures uint64
	// RuntimeEvents counts events received from the runtime's stream;
	// IncompleteEvents those without usable statuses (the pod was relisted
	// instead); StaleEvents those about already removed ids, and those
	// about ids the PLEG does not know that are older than Start or than a
	// full relist that did not list them (ignored).
	RuntimeEvents, IncompleteEvents, StaleEvents uint64
	// Delivered counts events put on the Watch channel (PodSync included),
	// Dropped those that did not fit, PodSyncs the PodSync events delivered.
	Delivered, Dropped, PodSyncs uint64
	// StreamConnects and StreamErrors count event stream connections and
	// failures.
	StreamConnects, StreamErrors uint64
	// Resyncs counts pods relisted because the status in the cache lagged
	// behind the reported events.
	Resyncs uint64
	// Outbox is how many cache writes and event batches are decided but
	// not yet carried out. With RuntimeEvents equal to the events the
	// runtime sent, Outbox 0 and the Watch channel empty, every event the
	// runtime sent is in the cache and delivered: what a caller stepping a
	// fake clock waits for before the next step.
	Outbox uint64
}

// New returns a PLEG over rt that writes cache. It does nothing until Start.
func New(rt Runtime, cache Cache, opts ...Option) (*PLEG, error) {
	if typednil.Is(rt) {
		return nil, &ConfigError{Option: "rt", Reason: "must not be nil"}
	}
	if typednil.Is(cache) {
		return nil, &ConfigError{Option: "cache", Reason: "must not be nil"}
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &PLEG{
		rt:         guarded{rt},
		cache:      cache,
		cfg:        cfg,
		log:        cfg.logger,
		clock:      cfg.clock,
		ch:         make(chan Event, cfg.capacity),
		notes:      &notifier{},
		pods:       map[types.UID]*podRecord{},
		owner:      map[string]types.UID{},
		tombstones: map[string]tombstone{},
		waiters:    map[*waiter]struct{}{},
		reinspect:  map[types.UID]struct{}{},
		pending:    map[types.UID]struct{}{},
		lagging:    map[types.UID]struct{}{},
		subs:       map[*Subscription]struct{}{},
		dirty:      newDirtyQueue(),
		wakeRelist: make(chan struct{}, 1),
		wakePods:   make(chan struct{}, 1),
		wakeResync: make(chan struct{}, 1),
	}, nil
}

// made reports whether p was made by New: every method of a PLEG that was
// not (its zero value, a nil pointer) answers without touching the runtime,
// the cache or a nil map.
func (p *PLEG) made() bool { return p != nil && p.cache != nil }

// Watch returns the channel events are delivered on (always the same one).
// It is closed by Close. A PLEG not made by New returns a closed channel.
func (p *PLEG) Watch() <-chan Event {
	if !p.made() {
		return closedEvents
	}
	return p.ch
}

// Start starts relisting (at once, then periodically) and, if enabled,
// watching the event stream. The PLEG runs until Close or until ctx ends.
// A nil ctx, or a PLEG not made by New, gives an *ArgError and starts
// nothing.
func (p *PLEG) Start(ctx context.Context) error {
	if !p.made() {
		return errNotNew("Start")
	}
	if ctx == nil {
		return &ArgError{Method: "Start", Arg: "ctx", Reason: "must not be nil"}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stopped:
		return ErrClosed
	case p.started:
		return ErrAlreadyStarted
	}
	p.started, p.startedAt = true, p.clock.Now()
	ctx, p.cancel = context.WithCancel(ctx)
	if p.cfg.events {
		stream, err := eventstream.Start(ctx, eventstream.Config{
			Source:    p.rt,
			Clock:     p.clock,
			BackOff:   backoff.Policy{Initial: p.cfg.reconnectInitial, Max: p.cfg.reconnectMax},
			Jitter:    0.2,
			Buffer:    128,
			OnConnect: p.streamConnected,
			OnEvent:   p.handleEvent,
			OnEnd:     p.streamDown,
		})
		if err != nil { // the config was validated by New
			p.cancel()
			return err
		}
		p.stream = stream
	}
	loops := []func(context.Context){p.relistLoop, p.podRelistLoop, p.resyncLoop}
	for _, loop := range loops {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			loop(ctx)
		}()
	}
	return nil
}

// Close stops every goroutine, waits for them, delivers pending
// observations and closes the Watch channel and every Subscription, after
// the events already in them: a reader still reads those. Waits blocked in
// WaitContainerState or WaitContainerRemoved return ErrClosed. It is
// idempotent and returns nil; on a PLEG not made by New it does nothing. It
// must not be called from the Cache or the observer, which run on the
// goroutines it waits for.
//
// Close does not wait for changes the PLEG has not observed yet: a relist or
// a runtime event in flight is abandoned, and PodSyncs still owed are not
// delivered. The package documentation ("Shutdown") gives the order that
// loses no event.
func (p *PLEG) Close() error {
	if !p.made() {
		return nil
	}
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.stopped = true
		cancel, stream := p.cancel, p.stream
		p.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		if stream != nil {
			_ = stream.Close()
		}
		p.wg.Wait()
		p.observe()
		p.mu.Lock()
		p.closed = true
		for s := range p.subs {
			p.endLocked(s, ErrClosed)
		}
		p.wakeWaitersLocked() // what the last flush made true is not an error
		for w := range p.waiters {
			p.endWaitLocked(w, nil, ErrClosed)
		}
		close(p.ch)
		p.mu.Unlock()
	})
	return nil
}

// observe hands the observations decided so far to the observer.
func (p *PLEG) observe() { p.notes.drain(p.cfg.observer) }

// Mode returns the current mode (ModeRelisting for a PLEG not made by New).
func (p *PLEG) Mode() Mode {
	if !p.made() {
		return ModeRelisting
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Stats returns a snapshot of the counters (all zero for a PLEG not made by
// New).
func (p *PLEG) Stats() Stats {
	if !p.made() {
		return Stats{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Outbox = p.queued - p.flushed
	return st
}

// RequestRelist asks for an on-demand relist of one pod: its sandboxes and
// containers are listed and inspected, the cache is written with a time
// taken before listing, and its events are delivered. Requests for a pod
// already pending are coalesced. Call it after acting on a pod, then wait
// with the cache's GetNewerThan(uid, timeOfAction) (see the package doc).
// A PLEG not made by New returns an *ArgError.
func (p *PLEG) RequestRelist(uid types.UID) error {
	if !p.made() {
		return errNotNew("RequestRelist")
	}
	if uid == "" {
		return &ArgError{Method: "RequestRelist", Arg: "uid", Reason: "must not be empty"}
	}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return ErrClosed
	}
	p.pending[uid] = struct{}{}
	p.mu.Unlock()
	signal(p.wakePods)
	return nil
}

// Healthy reports whether the runtime answered within the threshold: a
// relist, a pod relist or a probe succeeded, the event stream connected or
// delivered an event. Only answers from the runtime count; the cache never
// does. The error is a *HealthError (or ErrClosed, or an *ArgError for a
// PLEG not made by New).
func (p *PLEG) Healthy() (bool, error) {
	if !p.made() {
		return false, errNotNew("Healthy")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false, ErrClosed
	}
	he := &HealthError{
		Mode:        p.mode,
		LastActive:  p.lastActive,
		Threshold:   p.cfg.threshold,
		RelistErr:   p.relistErr,
		EventStream: p.cfg.events,
	}
	if !p.streamUp {
		he.StreamErr = p.streamErr
	}
	if !p.active {
		he.never = true
		return false, he
	}
	he.Since = p.clock.Since(p.lastActive)
	if he.Since > p.cfg.threshold {
		return false, he
	}
	return true, nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (p *PLEG) nextSeqLocked() uint64 {
	p.seq++
	return p.seq
}

func (p *PLEG) markActiveLocked(t time.Time) {
	if !p.active || t.After(p.lastActive) {
		p.lastActive = t
	}
	p.active = true
}

// staleLocked reports whether an event created at createdAt (the
// runtime's clock, which on one node is the PLEG's) about id, unknown to
// rec, tells of an object already gone: a full relist that began after
// the event did not list the id, or, before the first relist, the event
// is older than Start (the first relist, which begins after Start, lists
// the object if it still exists). A runtime can deliver such events late
// (containerd hands a new subscriber events queued while nobody read the
// stream, such as an earlier agent's pods of the same uid); applying one
// would record a sandbox or container that no longer exists, and the pod
// would be seen in it until the next full relist.
func (p *PLEG) staleLocked(rec *podRecord, id string, createdAt int64) bool {
	ref := p.listedAt
	if ref.IsZero() {
		ref = p.startedAt
	}
	if createdAt <= 0 || ref.IsZero() || !time.Unix(0, createdAt).Before(ref) {
		return false
	}
	if rec != nil && rec.entities[id] != nil {
		return false
	}
	_, listed := p.listed[id]
	return !listed
}

func (p *PLEG) tombstonedLocked(id string) bool {
	_, ok := p.tombstones[id]
	return ok
}

func (p *PLEG) recordLocked(obs *podObservation) *podRecord {
	rec := p.pods[obs.uid]
	if rec == nil {
		rec = &podRecord{uid: obs.uid, entities: map[string]*entity{}}
		p.pods[obs.uid] = rec
	}
	if obs.name != "" {
		rec.name, rec.namespace = obs.name, obs.namespace
	}
	return rec
}

// commitLocked applies changes to rec and returns their events.
func (p *PLEG) commitLocked(rec *podRecord, changes []change) []Event {
	var evs []Event
	now := p.clock.Now()
	for _, c := range changes {
		evs = append(evs, eventsFor(rec.uid, c)...)
		if c.seq > rec.seq {
			rec.seq = c.seq
		}
		if c.to == stateNonExistent {
			tb := tombstone{at: now, uid: rec.uid, kind: c.kind}
			if c.kind == kindContainer {
				tb.last = containerStatusIn(rec.status, c.id)
			}
			delete(rec.entities, c.id)
			delete(p.owner, c.id)
			p.tombstones[c.id] = tb
			continue
		}
		e := rec.entities[c.id]
		if e == nil {
			e = &entity{kind: c.kind}
			rec.entities[c.id] = e
			p.owner[c.id] = rec.uid
		}
		e.state = c.to
		if c.seq > e.seq {
			e.seq = c.seq
		}
		if c.sandboxID != "" {
			e.sandboxID = c.sandboxID
		}
	}
	return evs
}

// forgetLocked drops a pod without entities and queues the deletion of its
// cache entry, unless something newer than seq touched it.
func (p *PLEG) forgetLocked(rec *podRecord, touchedAfter bool) {
	if rec == nil || len(rec.entities) > 0 || touchedAfter {
		return
	}
	delete(p.pods, rec.uid)
	delete(p.reinspect, rec.uid)
	delete(p.lagging, rec.uid)
	p.deleteLocked(rec.uid)
}

// writeStatusLocked queues the cache write of st and remembers the newest
// status written for the pod (the base the event path merges into).
func (p *PLEG) writeStatusLocked(rec *podRecord, st *PodStatus) {
	p.setLocked(rec.uid, st, nil, st.Timestamp)
	if rec.status == nil || !st.Timestamp.Before(rec.status.Timestamp) {
		rec.status = st
	}
}

// verifyLocked checks that the newest status written for rec agrees with
// what the records say (the events delivered). They can disagree when the
// cache kept a status with a newer time but older content (an event whose
// CreatedAt is after a relist's start, carrying statuses gathered before
// the relist's inspection). The pod is then relisted on demand: the pod
// relist's newer timestamp makes the cache take the fresh status, so the
// cache never stays behind the events.
func (p *PLEG) verifyLocked(rec *podRecord) {
	if rec == nil || p.pods[rec.uid] != rec {
		return
	}
	if statusAgrees(rec) {
		return
	}
	p.stats.Resyncs++
	// A watcher that read the pod on the event it was delivered may have
	// read the older status; it is told to read again once it is fixed.
	p.lagging[rec.uid] = struct{}{}
	p.pending[rec.uid] = struct{}{}
	p.reinspect[rec.uid] = struct{}{} // and the next full relist, should the pod relist fail
	signal(p.wakePods)
}

func statusAgrees(rec *podRecord) bool {
	st := rec.status
	if st == nil {
		return false
	}
	n := 0
	for _, s := range st.SandboxStatuses {
		e := rec.entities[s.GetId()]
		if e == nil || e.state != sandboxState(s.GetState()) {
			return false
		}
		n++
	}
	for _, s := range st.ContainerStatuses {
		e := rec.entities[s.GetId()]
		if e == nil || e.state != containerState(s.GetState()) {
			return false
		}
		n++
	}
	return n == len(rec.entities)
}

// setModeLocked changes the mode and notifies the observer.
func (p *PLEG) setModeLocked(to Mode, cause error) {
	from := p.mode
	if from == to {
		return
	}
	p.mode = to
	p.log.Info("pleg mode changed", zap.Stringer("from", from), zap.Stringer("to", to), zap.Error(cause))
	p.notes.post(Observation{Kind: ObservedModeChange, From: from, To: to, Err: cause})
	signal(p.wakeRelist)
}

func (p *PLEG) requestReconcileLocked() {
	p.reconWant++
	signal(p.wakeRelist)
}

func (p *PLEG) gcTombstonesLocked() {
	now := p.clock.Now()
	for id, t := range p.tombstones {
		if now.Sub(t.at) > DefaultTombstoneTTL {
			delete(p.tombstones, id)
		}
	}
}
