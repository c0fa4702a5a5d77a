package asyncpull

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/backoff"
	"github.com/syncpod/syncpod/internal/typednil"
)

// ImageService is the part of k8s.io/cri-api/pkg/apis.ImageManagerService the scheduler uses,
// with the same signatures, so a criclient.Client, cri-api's FakeImageService or cri-client's
// remote image service can be passed directly. Both methods must be safe for concurrent use.
type ImageService interface {
	// ImageStatus returns the status of the image (Image is nil when it is absent).
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error)
	// PullImage pulls an image with the authentication config.
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
}

// Scheduler pulls images for pods without blocking them. Create it with New; it is safe for
// concurrent use; Close releases it. A Scheduler not made by New is not usable: Ensure,
// Wait and Subscribe answer an *ArgError saying "use New", Cancel does nothing, Stats is
// zero and Close returns nil.
type Scheduler struct {
	images ImageService
	cfg    config
	secret []byte
	log    *zap.Logger

	baseCtx    context.Context
	baseCancel context.CancelCauseFunc
	kick       chan struct{}
	notifyKick chan struct{}
	stop       chan struct{}
	wg         sync.WaitGroup

	mu           sync.Mutex
	closed       bool
	ops          map[opKey]*op
	queue        []*op
	runningOps   map[*op]struct{}
	perRegistry  map[string]int
	largeRunning int
	tokens       *rate.Limiter // nil: PullImage calls are not paced
	delays       *backoff.Keyed[backoffKey]
	seq          uint64
	anonSeq      uint64
	backoff      map[backoffKey]*backoffEntry
	records      map[string]*imageRecord
	pending      map[types.UID]map[opKey]pendingResult
	subs         map[types.UID]map[*Subscription]struct{}
	dirty        []types.UID
	dirtySet     map[types.UID]struct{}
	retryDue     map[types.UID]map[backoffKey]time.Time // back-offs ended since the pod last asked
	lastGC       time.Time
	counts       counters // cumulative fields of Stats
}

type opKey struct {
	image string
	cred  string // "" when anonymous or under ShareCredentials
	never bool   // presence check only (PullNever)
}

type phase int

const (
	phaseInspect phase = iota
	phaseQueued
	phasePulling
)

type waiterID struct {
	pod  types.UID
	anon uint64
}

type op struct {
	key       opKey
	registry  string
	cred      string // credential key of auth, even under ShareCredentials
	auth      *runtimeapi.AuthConfig
	sandbox   *runtimeapi.PodSandboxConfig
	phase     phase
	forcePull bool
	priority  int32
	size      int64
	large     bool
	seq       uint64
	enqueued  time.Time
	started   time.Time
	deadline  time.Time
	waiters   map[waiterID]int
	stops     []func() bool
	cancel    context.CancelCauseFunc
	finished  bool
	done      chan struct{}
	result    Result
}

type imageRecord struct {
	present    bool
	ref        string
	checkedAt  time.Time
	pulledWith map[string]bool // credential keys that pulled it here; empty: pre-loaded
}

type pendingResult struct {
	op     *op
	result Result
	at     time.Time
}

const gcInterval = time.Minute

// New returns a running Scheduler that pulls through images. Call Close to stop it. It returns
// a *ConfigError for a nil or typed-nil images and for an option value out of range.
func New(images ImageService, opts ...Option) (*Scheduler, error) {
	if images == nil || typednil.Is(images) {
		return nil, &ConfigError{Option: "images", Reason: "must not be nil"}
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
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // crypto/rand.Read never fails on supported platforms
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Scheduler{
		images:      images,
		cfg:         cfg,
		secret:      secret,
		log:         cfg.logger.Named("asyncpull"),
		baseCtx:     ctx,
		baseCancel:  cancel,
		kick:        make(chan struct{}, 1),
		notifyKick:  make(chan struct{}, 1),
		stop:        make(chan struct{}),
		ops:         map[opKey]*op{},
		runningOps:  map[*op]struct{}{},
		perRegistry: map[string]int{},
		delays:      backoff.NewKeyed[backoffKey](backoff.Policy{Initial: cfg.backOffInit, Max: cfg.backOffMax}),
		backoff:     map[backoffKey]*backoffEntry{},
		records:     map[string]*imageRecord{},
		pending:     map[types.UID]map[opKey]pendingResult{},
		subs:        map[types.UID]map[*Subscription]struct{}{},
		dirtySet:    map[types.UID]struct{}{},
		retryDue:    map[types.UID]map[backoffKey]time.Time{},
		lastGC:      cfg.clock.Now(),
	}
	if cfg.qps > 0 {
		s.tokens = rate.NewLimiter(rate.Limit(cfg.qps), cfg.burst)
		// The bucket starts full, at the scheduler's clock (a fake one in tests).
		s.tokens.SetLimitAt(cfg.clock.Now(), rate.Limit(cfg.qps))
	}
	s.wg.Add(1)
	go s.dispatchLoop()
	if cfg.notify != nil {
		s.wg.Add(1)
		go s.notifyLoop()
	}
	return s, nil
}

// Close cancels queued and in-flight pulls (their waiters get ErrClosed), drops the pending
// back-off wake-ups (no pod is woken after Close returns), waits for the scheduler's goroutines
// (including an in-progress WithNotify callback) and makes every later call return ErrClosed.
// It is idempotent and returns nil.
func (s *Scheduler) Close() error {
	if s.images == nil {
		return nil // a zero Scheduler has nothing to stop
	}
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		closedRes := func(o *op) Result {
			return Result{State: StateFailed, Image: o.key.image, Reason: ReasonErrImagePull, Err: ErrClosed}
		}
		for _, o := range s.queue {
			s.finishLocked(o, closedRes(o))
		}
		s.queue = nil
		for _, o := range s.ops { // inspecting or pulling: their goroutines finish them
			if o.cancel != nil {
				o.cancel(ErrClosed)
			}
		}
		s.baseCancel(ErrClosed)
		close(s.stop)
		for _, m := range s.subs {
			for sub := range m {
				sub.endLocked(ErrClosed)
			}
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Ensure returns at once with where req stands, starting or joining a pull if needed. ctx
// scopes the caller's interest, not the call: when ctx is done (or Cancel(req.PodUID) is
// called) the request stops counting as a waiter, and a pull nobody waits for is dropped from
// the queue or cancelled. Pass a context that lives as long as the pod (context.Background is
// fine if you call Cancel on pod deletion).
//
// When the result for the pod is ready, the pod is notified (WithNotify, Subscribe) and the
// next Ensure with the same request returns it (once; a later Ensure re-evaluates: a PullAlways
// request pulls again, an IfNotPresent one finds the image present).
//
// A StateBackOff answer registers the pod (req.PodUID; anonymous requests are not woken) for
// the end of the back-off: at Result.BackOffUntil, on the scheduler's clock, the pod is
// notified the same way, and its next Ensure starts the retry, so the caller needs no timer of
// its own. Only pods that met the back-off (Ensure or Wait answered StateBackOff) are woken, at
// most once per back-off, and not if ctx is done by then, after Cancel(req.PodUID) or after
// Close. A pod that collected StateFailed and wants the retry asks again: that Ensure answers
// StateBackOff and registers it.
func (s *Scheduler) Ensure(ctx context.Context, req Request) Result {
	res, _, _ := s.ensure(ctx, "Ensure", req)
	return res
}

// Wait is Ensure for callers that block: it returns when the request's result is final
// (Present, BackOff or Failed) or ctx is done. The error is Result.Err, or ctx's error wrapped
// with ErrCanceled.
func (s *Scheduler) Wait(ctx context.Context, req Request) (Result, error) {
	res, o, w := s.ensure(ctx, "Wait", req)
	if o == nil {
		return res, res.Err
	}
	select {
	case <-o.done:
	case <-ctx.Done():
		err := fmt.Errorf("wait %s: %w: %w", o.key.image, ErrCanceled, context.Cause(ctx))
		return Result{State: StateFailed, Image: o.key.image, Reason: ReasonErrImagePull, Err: err}, err
	}
	if w.pod != "" {
		s.mu.Lock()
		if pr, ok := s.pending[w.pod][o.key]; ok && pr.op == o {
			s.deletePendingLocked(w.pod, o.key)
		}
		s.mu.Unlock()
	}
	return o.result, o.result.Err
}

// Cancel drops every interest of the pod (call it when the pod is deleted): it stops waiting
// for its pulls (pulls nobody else waits for are dropped or cancelled) and for the end of its
// back-offs, and forgets results and wake-ups not yet collected. Subscriptions stay until
// closed.
func (s *Scheduler) Cancel(podUID types.UID) {
	if s.images == nil {
		return
	}
	var events []Event
	s.mu.Lock()
	for _, o := range s.opsSnapshotLocked() {
		for w := range o.waiters {
			if w.pod == podUID && podUID != "" {
				delete(o.waiters, w)
			}
		}
		if len(o.waiters) == 0 {
			events = append(events, s.abandonLocked(o)...)
		}
	}
	if podUID != "" {
		for _, b := range s.backoff {
			delete(b.waiting, podUID)
		}
	}
	delete(s.pending, podUID)
	delete(s.retryDue, podUID)
	s.mu.Unlock()
	s.emit(events)
}

func (s *Scheduler) opsSnapshotLocked() []*op {
	out := make([]*op, 0, len(s.ops))
	for _, o := range s.ops {
		out = append(out, o)
	}
	return out
}

func failed(image, reason string, err error) Result {
	return Result{State: StateFailed, Image: image, Reason: reason, Err: err}
}

// ensure is Ensure and the first half of Wait; method names the caller in
// the errors of a misused call.
func (s *Scheduler) ensure(ctx context.Context, method string, req Request) (Result, *op, waiterID) {
	if s.images == nil {
		return Result{State: StateFailed, Image: req.Image, Err: errNotNew(method)}, nil, waiterID{}
	}
	if ctx == nil {
		err := &ArgError{Method: method, Arg: "ctx", Reason: "must not be nil"}
		return Result{State: StateFailed, Image: req.Image, Err: err}, nil, waiterID{}
	}
	policy := req.PullPolicy
	if policy == "" {
		policy = PullIfNotPresent
	}
	switch {
	case policy != PullIfNotPresent && policy != PullAlways && policy != PullNever:
		return failed("", ReasonErrImagePull, &RequestError{Field: "PullPolicy", Value: string(policy), Err: ErrInvalidRequest}), nil, waiterID{}
	case req.SizeHint < 0:
		return failed("", ReasonErrImagePull, &RequestError{Field: "SizeHint", Value: fmt.Sprint(req.SizeHint), Err: ErrInvalidRequest}), nil, waiterID{}
	}
	n, err := normalize(req.Image)
	if err != nil {
		s.log.Debug("invalid image name", zap.String("image", req.Image), zap.String("pod", string(req.PodUID)), zap.Error(err))
		return failed("", ReasonInvalidImageName, err), nil, waiterID{}
	}
	cred := credentialKey(s.secret, req.Auth)
	key := opKey{image: n.image, cred: cred, never: policy == PullNever}
	if s.cfg.credentials == ShareCredentials {
		key.cred = ""
	}
	bkey := backoffKey{image: key.image, cred: key.cred}

	var events []Event
	defer func() { s.emit(events) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return failed(n.image, ReasonErrImagePull, ErrClosed), nil, waiterID{}
	}
	now := s.cfg.clock.Now()
	s.gcLocked(now)
	w := waiterID{pod: req.PodUID}
	if w.pod == "" {
		s.anonSeq++
		w.anon = s.anonSeq
	} else {
		s.forgetRetryDueLocked(w.pod, bkey)
		if pr, ok := s.pending[w.pod][key]; ok {
			s.deletePendingLocked(w.pod, key)
			return pr.result, nil, w
		}
	}
	if o := s.ops[key]; o != nil {
		s.joinLocked(ctx, o, w, req)
		if policy == PullAlways && o.phase == phaseInspect {
			o.forcePull = true
		}
		s.counts.dedupeHits++
		events = append(events, Event{Kind: EventDedupe, Image: o.key.image, Registry: o.registry, Waiters: len(o.waiters)})
		return o.progress(), o, w
	}
	rec := s.records[n.image]
	if policy != PullAlways && rec != nil && rec.present && now.Sub(rec.checkedAt) < s.cfg.presentTTL &&
		(policy == PullNever || s.credOKLocked(rec, cred)) {
		events = append(events, Event{Kind: EventPresent, Image: n.image, Registry: n.registry})
		return Result{State: StatePresent, Image: n.image, ImageRef: rec.ref}, nil, w
	}
	if b := s.backoff[bkey]; policy != PullNever && b != nil {
		if now.Before(b.until) {
			s.awaitBackOffLocked(ctx, b, w.pod)
			return s.backOffResult(n.image, b), nil, w
		}
		if len(b.waiting) > 0 {
			// The back-off has ended and this request starts the retry before the dispatcher
			// has seen the expiry: wake the other waiting pods now, so they join this pull.
			s.wakeBackOffLocked(bkey, b, w.pod, now)
		}
	}

	o := &op{
		key:      key,
		registry: n.registry,
		cred:     cred,
		auth:     req.Auth,
		sandbox:  req.PodSandboxConfig,
		waiters:  map[waiterID]int{},
		done:     make(chan struct{}),
		priority: req.Priority,
		size:     req.SizeHint,
		enqueued: now,
	}
	// Arrival order, not the order in which presence checks return, decides FIFO ties.
	s.seq++
	o.seq = s.seq
	s.ops[key] = o
	s.joinLocked(ctx, o, w, req)
	if policy == PullAlways || (policy == PullIfNotPresent && rec != nil && rec.present && !s.credOKLocked(rec, cred)) {
		o.forcePull = true
		events = append(events, s.enqueueLocked(o))
		s.log.Debug("pull queued", s.fields(o, zap.String("pod", string(req.PodUID)))...)
		return o.progress(), o, w
	}
	o.phase = phaseInspect
	ictx, cancel := context.WithCancelCause(s.baseCtx)
	o.cancel = cancel
	s.wg.Add(1)
	go s.runInspect(ictx, o)
	return o.progress(), o, w
}

func (o *op) progress() Result {
	st := StateQueued
	if o.phase == phasePulling {
		st = StatePulling
	}
	return Result{State: st, Image: o.key.image}
}

func (s *Scheduler) credOKLocked(rec *imageRecord, cred string) bool {
	if s.cfg.credentials == ShareCredentials || rec == nil || len(rec.pulledWith) == 0 {
		return true
	}
	return rec.pulledWith[""] || rec.pulledWith[cred]
}

func (s *Scheduler) joinLocked(ctx context.Context, o *op, w waiterID, req Request) {
	o.waiters[w]++
	o.priority = max(o.priority, req.Priority)
	o.size = max(o.size, req.SizeHint)
	if ctx.Done() != nil {
		o.stops = append(o.stops, context.AfterFunc(ctx, func() { s.leave(o, w) }))
	}
}

// leave drops one registration of w; a pull without waiters is abandoned.
func (s *Scheduler) leave(o *op, w waiterID) {
	var events []Event
	s.mu.Lock()
	if !o.finished && o.waiters[w] > 0 {
		if o.waiters[w]--; o.waiters[w] == 0 {
			delete(o.waiters, w)
		}
		if len(o.waiters) == 0 {
			events = s.abandonLocked(o)
		}
	}
	s.mu.Unlock()
	s.emit(events)
}

// abandonLocked drops a pull nobody waits for: a queued one leaves the queue, a running one is
// detached (new requests start afresh) and its CRI call cancelled.
func (s *Scheduler) abandonLocked(o *op) []Event {
	if o.finished {
		return nil
	}
	s.counts.canceled++
	ev := Event{Kind: EventCanceled, Image: o.key.image, Registry: o.registry}
	s.log.Debug("pull abandoned: no waiters", s.fields(o)...)
	if o.phase == phaseQueued {
		if i := slices.Index(s.queue, o); i >= 0 {
			s.queue = slices.Delete(s.queue, i, i+1)
		}
		s.finishLocked(o, failed(o.key.image, ReasonErrImagePull, &PullError{Image: o.key.image, Class: ErrCanceled, Err: context.Canceled}))
		return []Event{ev}
	}
	if s.ops[o.key] == o {
		delete(s.ops, o.key)
	}
	if o.cancel != nil {
		o.cancel(ErrCanceled)
	}
	return []Event{ev}
}

func (s *Scheduler) enqueueLocked(o *op) Event {
	o.phase = phaseQueued
	o.large = s.cfg.largeSize > 0 && o.size >= s.cfg.largeSize
	s.queue = append(s.queue, o)
	s.kickDispatch()
	return Event{Kind: EventQueued, Image: o.key.image, Registry: o.registry, Waiters: len(o.waiters)}
}

// finishLocked completes o and delivers res to its waiters.
func (s *Scheduler) finishLocked(o *op, res Result) {
	if o.finished {
		return
	}
	o.finished = true
	if s.ops[o.key] == o {
		delete(s.ops, o.key)
	}
	o.result = res
	close(o.done)
	for _, stop := range o.stops {
		stop()
	}
	o.stops = nil
	now := s.cfg.clock.Now()
	for w := range o.waiters {
		if w.pod == "" {
			continue
		}
		m := s.pending[w.pod]
		if m == nil {
			m = map[opKey]pendingResult{}
			s.pending[w.pod] = m
		}
		m[o.key] = pendingResult{op: o, result: res, at: now}
		s.markDirtyLocked(w.pod)
	}
}

func (s *Scheduler) deletePendingLocked(pod types.UID, key opKey) {
	if m := s.pending[pod]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(s.pending, pod)
		}
	}
}

func (s *Scheduler) runInspect(ctx context.Context, o *op) {
	defer s.wg.Done()
	resp, err := s.imageStatus(ctx, o.key.image)
	var events []Event
	s.mu.Lock()
	defer func() { s.mu.Unlock(); s.emit(events) }()
	now := s.cfg.clock.Now()
	if ctx.Err() != nil {
		s.finishLocked(o, s.canceledResult(o, context.Cause(ctx), err))
		return
	}
	if err != nil {
		s.log.Info("image inspect failed", s.fields(o, zap.Error(err))...)
		s.finishLocked(o, failed(o.key.image, ReasonImageInspectError, fmt.Errorf("inspect %s: %w: %w", o.key.image, ErrInspect, err)))
		return
	}
	rec := s.records[o.key.image]
	if img := resp.GetImage(); img != nil {
		if rec == nil {
			rec = &imageRecord{pulledWith: map[string]bool{}}
			s.records[o.key.image] = rec
		}
		rec.present, rec.ref, rec.checkedAt = true, img.GetId(), now
		if o.key.never || (!o.forcePull && s.credOKLocked(rec, o.cred)) {
			events = append(events, Event{Kind: EventPresent, Image: o.key.image, Registry: o.registry, Size: img.GetSize()})
			s.finishLocked(o, Result{State: StatePresent, Image: o.key.image, ImageRef: img.GetId()})
			return
		}
	} else if rec != nil {
		rec.present = false
	}
	if o.key.never {
		s.finishLocked(o, failed(o.key.image, ReasonErrImageNeverPull,
			fmt.Errorf("image %q: %w", o.key.image, ErrNeverPull)))
		return
	}
	o.cancel(context.Canceled) // release the inspect context; a pull gets its own
	o.cancel = nil
	events = append(events, s.enqueueLocked(o))
	s.log.Debug("pull queued", s.fields(o)...)
}

// canceledResult is the result of an operation whose context was cancelled.
func (s *Scheduler) canceledResult(o *op, cause, err error) Result {
	if errors.Is(cause, ErrClosed) {
		return failed(o.key.image, ReasonErrImagePull, ErrClosed)
	}
	if err == nil {
		err = context.Canceled
	}
	return failed(o.key.image, ReasonErrImagePull, &PullError{Image: o.key.image, Class: ErrCanceled, Err: err})
}

func (s *Scheduler) emit(events []Event) {
	if s.cfg.observer == nil {
		return
	}
	for _, e := range events {
		s.cfg.observer(e)
	}
}

func (s *Scheduler) fields(o *op, extra ...zap.Field) []zap.Field {
	cred := o.cred
	if cred == "" {
		cred = "none"
	}
	return append([]zap.Field{zap.String("image", o.key.image), zap.String("registry", o.registry), zap.String("cred", cred)}, extra...)
}

// gcLocked drops idle back-off entries, uncollected results and wake-ups, and stale records.
func (s *Scheduler) gcLocked(now time.Time) {
	if now.Sub(s.lastGC) < gcInterval {
		return
	}
	s.lastGC = now
	for k, b := range s.backoff {
		// An entry with waiting pods is kept until the dispatcher has woken them, even if the
		// clock jumped past it: dropping it here would lose their wake-up.
		if len(b.waiting) == 0 && now.Sub(b.last) > 2*s.cfg.backOffMax {
			delete(s.backoff, k)
			s.delays.Reset(k)
		}
	}
	s.delays.Forget(now)
	keep := max(2*s.cfg.backOffMax, s.cfg.presentTTL)
	for pod, m := range s.pending {
		for k, pr := range m {
			if now.Sub(pr.at) > keep {
				delete(m, k)
			}
		}
		if len(m) == 0 {
			delete(s.pending, pod)
		}
	}
	for pod, m := range s.retryDue {
		for k, at := range m {
			if now.Sub(at) > keep {
				delete(m, k)
			}
		}
		if len(m) == 0 {
			delete(s.retryDue, pod)
		}
	}
	for img, r := range s.records {
		if now.Sub(r.checkedAt) > 24*time.Hour {
			delete(s.records, img)
		}
	}
}
