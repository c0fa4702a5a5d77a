package shim

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// lateSandboxKeep is how long a sandbox the runtime created after its
// RunPodSandbox's caller gave up is kept for that caller's retry. The
// kubelet retries at its pod worker's next sync of the pod, seconds after
// the failed one (about 18 s after a 4-minute freeze); a retry later than
// this is forwarded and answered by the runtime, as without the shim,
// and by then the kubelet's relist has shown it the sandbox anyway.
const lateSandboxKeep = lateGrace

// sandboxKey names a sandbox by what the runtime makes unique and what
// the kubelet repeats when it retries a RunPodSandbox it saw fail.
type sandboxKey struct {
	name, namespace, uid string
	attempt              uint32
}

// sandboxKeyOf is req's key; ok is false for a request without the
// metadata the runtime requires, which is forwarded for the runtime to
// reject.
func sandboxKeyOf(req *runtimeapi.RunPodSandboxRequest) (k sandboxKey, ok bool) {
	md := req.GetConfig().GetMetadata()
	if md.GetName() == "" || md.GetNamespace() == "" || md.GetUid() == "" {
		return sandboxKey{}, false
	}
	return sandboxKey{md.GetName(), md.GetNamespace(), md.GetUid(), md.GetAttempt()}, true
}

// sameSandbox says whether b asks for exactly the sandbox a asks for, so
// that a's answer is b's: a call with another config (a changed pod spec,
// another runtime handler) is the runtime's to answer.
func sameSandbox(a, b *runtimeapi.RunPodSandboxRequest) bool {
	return a.GetRuntimeHandler() == b.GetRuntimeHandler() && proto.Equal(a.GetConfig(), b.GetConfig())
}

// sandboxCall is a RunPodSandbox of the synchronous modes sent to the
// runtime.
type sandboxCall struct {
	key  sandboxKey
	req  *runtimeapi.RunPodSandboxRequest
	done chan struct{} // closed once resp and err are set

	// Guarded by sandboxRuns.mu.
	resp    *runtimeapi.RunPodSandboxResponse
	err     error
	waiters int       // callers waiting for the answer, the sender's included
	kept    time.Time // when kept for a retry; zero while not kept
}

func (c *sandboxCall) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// sandboxRuns holds the RunPodSandbox calls of the synchronous modes that
// the runtime has, so that a same-key call joins one instead of being
// sent again, and the sandboxes the runtime created after every caller of
// their call gave up, for the retry. An entry is dropped when its call
// fails, when a caller gets its answer, when a retry claims it, when its
// sandbox is removed and when lateSandboxKeep has passed since it was
// kept (pruned as the map is used: no timer per entry).
type sandboxRuns struct {
	s *Shim

	life   context.Context // ended by close: calls still at the runtime end
	cancel context.CancelFunc
	wg     sync.WaitGroup // the calls' goroutines

	mu     sync.Mutex
	closed bool
	calls  map[sandboxKey]*sandboxCall
	joined uint64
}

func newSandboxRuns(s *Shim) *sandboxRuns {
	r := &sandboxRuns{s: s, calls: map[sandboxKey]*sandboxCall{}}
	r.life, r.cancel = context.WithCancel(context.Background())
	return r
}

// How a RunPodSandbox is answered, by what the shim already has for its
// key.
type joinOutcome int

const (
	joinNone     joinOutcome = iota // nothing for the key: send it
	joinSent                        // registered and sent: wait for it
	joinWaiting                     // joined the same call at the runtime: wait for it
	joinKept                        // answered by the sandbox kept for the key
	joinConflict                    // the key's call asks for another sandbox: forward
)

// run answers a RunPodSandbox of the synchronous modes. The call is
// admitted with its caller's context, so one whose caller gives up while
// it is queued is never sent; once sent it is the runtime's until the
// runtime answers (see detached), and its caller waits for that answer or
// its own context.
func (r *sandboxRuns) run(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	s := r.s
	if s.draining() {
		return nil, status.Error(codes.Unavailable, ErrDraining.Error())
	}
	key, ok := sandboxKeyOf(req)
	if !ok {
		return s.forwardSandbox(ctx, req)
	}
	c, resp, how := r.join(key, req)
	if how == joinNone {
		release, err := s.admit(ctx, "RunPodSandbox")
		if err != nil {
			return nil, err
		}
		// Another call of the key may have been sent meanwhile.
		if c, resp, how = r.start(ctx, key, req, release); how != joinSent {
			release()
		}
	}
	switch how {
	case joinKept:
		return resp, nil
	case joinConflict:
		return s.forwardSandbox(ctx, req)
	case joinNone: // closed
		return nil, status.Error(codes.Unavailable, ErrDraining.Error())
	}
	return r.wait(ctx, c)
}

// forwardSandbox is RunPodSandbox forwarded with its caller's context.
func (s *Shim) forwardSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	resp, err := forward(s, ctx, "RunPodSandbox", req, s.rt.RunPodSandbox)
	if err == nil {
		s.statuses.wrote(objKey{objSandbox, resp.GetPodSandboxId()}, "", sandboxRank(runtimeapi.PodSandboxState_SANDBOX_READY), nil)
	}
	return resp, err
}

// join looks up what the shim has for key: joinNone, joinConflict, a
// kept sandbox (claimed: it is dropped) or a call at the runtime to wait
// for.
func (r *sandboxRuns) join(key sandboxKey, req *runtimeapi.RunPodSandboxRequest) (*sandboxCall, *runtimeapi.RunPodSandboxResponse, joinOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.joinLocked(key, req)
}

func (r *sandboxRuns) joinLocked(key sandboxKey, req *runtimeapi.RunPodSandboxRequest) (*sandboxCall, *runtimeapi.RunPodSandboxResponse, joinOutcome) {
	r.pruneLocked()
	c := r.calls[key]
	switch {
	case c == nil:
		return nil, nil, joinNone
	case !sameSandbox(c.req, req):
		return nil, nil, joinConflict
	case c.finished():
		// Succeeded (a failed call is dropped at once) with no caller
		// answered yet: kept, or its waiters still deciding.
		delete(r.calls, key)
		r.joined++
		return nil, c.resp, joinKept
	}
	c.waiters++
	r.joined++
	return c, nil, joinWaiting
}

// start joins what the shim has for key by now or, with nothing there,
// registers the call and sends it; the call's goroutine then owns release,
// the admission slot, until the runtime answers. After close it returns
// joinNone: nothing is sent.
func (r *sandboxRuns) start(ctx context.Context, key sandboxKey, req *runtimeapi.RunPodSandboxRequest, release func()) (*sandboxCall, *runtimeapi.RunPodSandboxResponse, joinOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, joinNone
	}
	if c, resp, how := r.joinLocked(key, req); how != joinNone {
		return c, resp, how
	}
	c := &sandboxCall{key: key, req: req, done: make(chan struct{}), waiters: 1}
	r.calls[key] = c
	r.wg.Add(1)
	go r.send(ctx, c, release)
	return c, nil, joinSent
}

// send makes c's call to the runtime, detached from its caller, and
// records the answer.
func (r *sandboxRuns) send(ctx context.Context, c *sandboxCall, release func()) {
	defer r.wg.Done()
	cctx, cancel := detached(ctx)
	stop := context.AfterFunc(r.life, cancel)
	start := time.Now()
	resp, err := r.s.rt.RunPodSandbox(cctx, c.req)
	stop()
	cancel()
	release()
	r.s.logCall("RunPodSandbox", start, err)
	if err == nil {
		// Before anyone has the answer: a List that begins after it
		// shows the sandbox.
		r.s.statuses.wrote(objKey{objSandbox, resp.GetPodSandboxId()}, "", sandboxRank(runtimeapi.PodSandboxState_SANDBOX_READY), nil)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c.resp, c.err = resp, err
	close(c.done)
	if err != nil {
		r.dropLocked(c)
		return
	}
	r.keepLocked(c)
}

// wait waits for c's answer or ctx. A caller whose context ended gets
// what it would get from the runtime directly, DEADLINE_EXCEEDED or
// CANCELED, even when the answer came at the same moment: its client has
// given up, so the answer would not reach it, and the sandbox is kept for
// its retry instead.
func (r *sandboxRuns) wait(ctx context.Context, c *sandboxCall) (*runtimeapi.RunPodSandboxResponse, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c.waiters--
	if ctx.Err() != nil {
		r.keepLocked(c)
		return nil, callerGone(ctx)
	}
	// A caller has the answer: the sandbox is not kept.
	r.dropLocked(c)
	return c.resp, c.err
}

// keepLocked keeps c's sandbox for a retry once c succeeded and no caller
// waits for it any more; until then a waiter may still get the answer.
func (r *sandboxRuns) keepLocked(c *sandboxCall) {
	if c.waiters > 0 || !c.finished() || c.err != nil || r.calls[c.key] != c || !c.kept.IsZero() {
		return
	}
	c.kept = r.s.cfg.Clock.Now()
	r.s.log.Info("RunPodSandbox answered after its caller gave up; the sandbox is kept for the retry",
		zap.String("podSandboxId", c.resp.GetPodSandboxId()), zap.String("pod", c.key.namespace+"/"+c.key.name),
		zap.Uint32("attempt", c.key.attempt), zap.Duration("keep", lateSandboxKeep))
}

// dropLocked drops c's entry, if it is still the key's.
func (r *sandboxRuns) dropLocked(c *sandboxCall) {
	if r.calls[c.key] == c {
		delete(r.calls, c.key)
	}
}

// pruneLocked drops the kept sandboxes whose retry did not come in time.
func (r *sandboxRuns) pruneLocked() {
	now := r.s.cfg.Clock.Now()
	for k, c := range r.calls {
		if !c.kept.IsZero() && now.Sub(c.kept) >= lateSandboxKeep {
			delete(r.calls, k)
		}
	}
}

// removed drops the kept sandbox id, which RemovePodSandbox removed: a
// retry must not be answered with a sandbox that no longer exists.
func (r *sandboxRuns) removed(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, c := range r.calls {
		if c.finished() && c.err == nil && c.resp.GetPodSandboxId() == id {
			delete(r.calls, k)
		}
	}
}

// stats returns how many calls were answered by joining or from a kept
// sandbox, how many calls the runtime has with no caller left, and how
// many sandboxes are kept now.
func (r *sandboxRuns) stats() (joined uint64, abandoned, kept int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	for _, c := range r.calls {
		switch {
		case !c.kept.IsZero():
			kept++
		case !c.finished() && c.waiters == 0:
			abandoned++
		}
	}
	return r.joined, abandoned, kept
}

// close ends the calls still at the runtime (their waiters get the
// runtime's error) and waits for their goroutines; nothing is sent after.
func (r *sandboxRuns) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}
