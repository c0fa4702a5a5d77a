package shim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SandboxIDLabel is the label the shim adds to every sandbox it creates
// asynchronously, holding the id it minted for it, so that a restarted
// shim rebuilds its id map from the runtime. It is stripped from every
// answer.
const SandboxIDLabel = "io.syncpod.crishim/sandbox-id"

// asyncRunTimeout bounds a RunPodSandbox at the runtime that no caller's
// deadline bounds: a queued one (async mode), and a detached call whose
// caller set no deadline (see detached). It is the kubelet's default for
// RunPodSandbox, twice its 2 minute request timeout, so the shim never
// gives up on the runtime before the kubelet would have.
const asyncRunTimeout = 4 * time.Minute

// asyncSandboxes runs RunPodSandbox in the background and maps the ids it
// minted to the runtime's.
type asyncSandboxes struct {
	s     *Shim
	queue chan *asyncSandbox

	life    context.Context
	cancel  context.CancelFunc
	workers sync.WaitGroup

	mu       sync.Mutex
	byID     map[string]*asyncSandbox // minted id -> sandbox
	byReal   map[string]string        // runtime id -> minted id
	inflight int                      // accepted, not finished
	idle     chan struct{}            // closed and replaced when inflight drops to 0
}

type asyncSandbox struct {
	id       string
	req      *runtimeapi.RunPodSandboxRequest
	accepted time.Time
	done     chan struct{}
	real     string // after done, on success
	err      error  // after done, on failure
}

func newAsyncSandboxes(s *Shim, workers, queue int) *asyncSandboxes {
	if workers <= 0 {
		workers = 8
	}
	if queue <= 0 {
		queue = 256
	}
	a := &asyncSandboxes{
		s:      s,
		queue:  make(chan *asyncSandbox, queue),
		byID:   map[string]*asyncSandbox{},
		byReal: map[string]string{},
		idle:   make(chan struct{}),
	}
	a.life, a.cancel = context.WithCancel(context.Background())
	a.workers.Add(workers)
	for range workers {
		go a.work()
	}
	return a
}

func mintID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// run validates, queues and returns the minted id.
func (a *asyncSandboxes) run(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	if a.s.draining() {
		return nil, status.Error(codes.Unavailable, ErrDraining.Error())
	}
	md := req.GetConfig().GetMetadata()
	if md.GetName() == "" || md.GetNamespace() == "" || md.GetUid() == "" {
		return nil, status.Error(codes.InvalidArgument, "RunPodSandbox: config.metadata needs name, namespace and uid")
	}
	cfg := proto.Clone(req.GetConfig()).(*runtimeapi.PodSandboxConfig)
	e := &asyncSandbox{id: mintID(), accepted: time.Now(), done: make(chan struct{})}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	cfg.Labels[SandboxIDLabel] = e.id
	e.req = &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: req.GetRuntimeHandler()}

	a.mu.Lock()
	for _, o := range a.byID {
		om := o.req.GetConfig().GetMetadata()
		if !o.finished() && om.GetName() == md.GetName() && om.GetNamespace() == md.GetNamespace() &&
			om.GetUid() == md.GetUid() && om.GetAttempt() == md.GetAttempt() {
			a.mu.Unlock()
			return nil, status.Errorf(codes.AlreadyExists, "RunPodSandbox: sandbox %s_%s_%s_%d is already being created as %s",
				md.GetName(), md.GetNamespace(), md.GetUid(), md.GetAttempt(), o.id)
		}
	}
	a.byID[e.id] = e
	a.inflight++
	a.mu.Unlock()

	select {
	case a.queue <- e:
		return &runtimeapi.RunPodSandboxResponse{PodSandboxId: e.id}, nil
	case <-ctx.Done():
		a.finish(e, "", ctx.Err())
		a.forget(e.id)
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-a.life.Done():
		a.finish(e, "", ErrDraining)
		a.forget(e.id)
		return nil, status.Error(codes.Unavailable, ErrDraining.Error())
	}
}

func (e *asyncSandbox) finished() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

func (a *asyncSandboxes) work() {
	defer a.workers.Done()
	for {
		select {
		case <-a.life.Done():
			return
		case e := <-a.queue:
			ctx, cancel := context.WithTimeout(a.life, asyncRunTimeout)
			// Accepted before any Drain: completes even while draining.
			resp, err := admitAndCall(a.s, ctx, "RunPodSandbox", e.req, a.s.rt.RunPodSandbox)
			cancel()
			if err == nil && resp.GetPodSandboxId() == "" {
				err = status.Error(codes.Internal, "RunPodSandbox: runtime returned an empty sandbox id")
			}
			if err != nil {
				a.s.log.Info("asynchronous RunPodSandbox failed", zap.String("podSandboxId", e.id), zap.Error(err))
			}
			a.finish(e, resp.GetPodSandboxId(), err)
		}
	}
}

func (a *asyncSandboxes) finish(e *asyncSandbox, real string, err error) {
	if real != "" {
		// Map the id and tell the view before the placeholder goes, so
		// no List in between misses the sandbox (ListPodSandbox drops a
		// placeholder the view already shows).
		a.mu.Lock()
		a.byReal[real] = e.id
		a.mu.Unlock()
		a.s.statuses.wrote(objKey{objSandbox, real}, "", sandboxRank(runtimeapi.PodSandboxState_SANDBOX_READY), nil)
	}
	a.mu.Lock()
	e.real, e.err = real, err
	close(e.done)
	a.inflight--
	if a.inflight == 0 {
		close(a.idle)
		a.idle = make(chan struct{})
	}
	a.mu.Unlock()
}

// wait returns once every accepted call has finished, or ctx ended.
func (a *asyncSandboxes) wait(ctx context.Context) error {
	for {
		a.mu.Lock()
		n, idle := a.inflight, a.idle
		a.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("crishim: %d asynchronous RunPodSandbox calls still running: %w", n, ctx.Err())
		}
	}
}

// close cancels the calls still running, fails the queued ones and stops
// the workers.
func (a *asyncSandboxes) close() {
	a.cancel()
	a.workers.Wait()
	for {
		select {
		case e := <-a.queue:
			a.finish(e, "", ErrDraining)
		default:
			return
		}
	}
}

// recover rebuilds the id map from the label on the runtime's sandboxes.
func (a *asyncSandboxes) recover(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := a.s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, sb := range resp.GetItems() {
		if id := sb.GetLabels()[SandboxIDLabel]; id != "" {
			e := &asyncSandbox{id: id, real: sb.GetId(), done: make(chan struct{})}
			close(e.done)
			a.byID[id], a.byReal[sb.GetId()] = e, id
		}
	}
	return nil
}

// await waits for the sandbox named id. ids the shim did not mint come back
// as they are. failed reports a sandbox whose creation failed; err is then
// its error.
func (a *asyncSandboxes) await(ctx context.Context, id string) (real string, failed bool, err error) {
	a.mu.Lock()
	e := a.byID[id]
	a.mu.Unlock()
	if e == nil {
		return id, false, nil
	}
	var early <-chan time.Time
	if d, ok := ctx.Deadline(); ok && !e.finished() {
		left := time.Until(d)
		t := a.s.cfg.Clock.NewTimer(left - min(sandboxWaitReserve, left/4))
		defer t.Stop()
		early = t.C()
	}
	select {
	case <-e.done:
	case <-early:
		return "", false, status.Errorf(codes.DeadlineExceeded, "sandbox %s is still being created: the call was not sent to the runtime, with too little of its deadline left", id)
	case <-ctx.Done():
		return "", false, status.Errorf(codes.DeadlineExceeded, "waiting for sandbox %s to be created: %v", id, ctx.Err())
	}
	if e.err != nil {
		if _, ok := status.FromError(e.err); !ok || errors.Is(e.err, ErrDraining) {
			return "", true, status.Errorf(codes.Unavailable, "RunPodSandbox of %s: %v", id, e.err)
		}
		return "", true, e.err
	}
	return e.real, false, nil
}

// settledReal returns the runtime id for id without waiting; ok is false
// while the sandbox is being created or after its creation failed.
func (a *asyncSandboxes) settledReal(id string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.byID[id]
	if e == nil {
		return id, true
	}
	if !e.finished() || e.err != nil {
		return "", false
	}
	return e.real, true
}

func (a *asyncSandboxes) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.byID[id]; e != nil {
		delete(a.byID, id)
		if e.real != "" {
			delete(a.byReal, e.real)
		}
	}
}

// status answers PodSandboxStatus for a sandbox not created (yet): READY
// while its creation runs, NOTREADY after it failed. ok is false for every
// other id.
func (a *asyncSandboxes) status(id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.byID[id]
	if e == nil || (e.finished() && e.err == nil) {
		return nil, false
	}
	sb := a.placeholderLocked(e)
	st := &runtimeapi.PodSandboxStatus{
		Id: sb.Id, Metadata: sb.Metadata, State: sb.State, CreatedAt: sb.CreatedAt,
		Labels: sb.Labels, Annotations: sb.Annotations, RuntimeHandler: sb.RuntimeHandler,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: e.req.GetConfig().GetLinux().GetSecurityContext().GetNamespaceOptions()}},
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st}
	if verbose {
		if e.err != nil {
			resp.Info = map[string]string{"crishim": "RunPodSandbox failed: " + e.err.Error()}
		} else {
			resp.Info = map[string]string{"crishim": "RunPodSandbox accepted, not completed yet"}
		}
	}
	return resp, true
}

// placeholderLocked is the list item of a sandbox not created (yet).
func (a *asyncSandboxes) placeholderLocked(e *asyncSandbox) *runtimeapi.PodSandbox {
	cfg := e.req.GetConfig()
	state := runtimeapi.PodSandboxState_SANDBOX_READY
	if e.finished() && e.err != nil {
		state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	return &runtimeapi.PodSandbox{
		Id: e.id, Metadata: cfg.GetMetadata(), State: state, CreatedAt: e.accepted.UnixNano(),
		Labels: stripLabel(cfg.GetLabels()), Annotations: cfg.GetAnnotations(), RuntimeHandler: e.req.GetRuntimeHandler(),
	}
}

// sandboxFilter translates a ListPodSandbox filter and returns the
// placeholders it matches. onlyPending: the filter names a sandbox not
// created (yet), so the runtime has nothing to add.
func (a *asyncSandboxes) sandboxFilter(f *runtimeapi.PodSandboxFilter) (*runtimeapi.PodSandboxFilter, []*runtimeapi.PodSandbox, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for _, e := range a.byID {
		if e.finished() && e.err == nil {
			continue
		}
		sb := a.placeholderLocked(e)
		if (f.GetId() == "" || f.GetId() == e.id) &&
			(f.GetState() == nil || f.GetState().GetState() == sb.State) &&
			labelsMatch(f.GetLabelSelector(), sb.Labels) {
			out = append(out, sb)
		}
	}
	if id := f.GetId(); id != "" {
		if e := a.byID[id]; e != nil {
			if !e.finished() || e.err != nil {
				return f, out, true
			}
			f = &runtimeapi.PodSandboxFilter{Id: e.real, State: f.GetState(), LabelSelector: f.GetLabelSelector()}
		}
	}
	return f, out, false
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func stripLabel(l map[string]string) map[string]string {
	if _, ok := l[SandboxIDLabel]; !ok {
		return l
	}
	out := maps.Clone(l)
	delete(out, SandboxIDLabel)
	return out
}

func (a *asyncSandboxes) mintedLocked(real string) (string, bool) {
	id, ok := a.byReal[real]
	return id, ok
}

// editSandboxes shows minted ids and hides the label.
func (a *asyncSandboxes) editSandboxes(items []*runtimeapi.PodSandbox) []*runtimeapi.PodSandbox {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*runtimeapi.PodSandbox, 0, len(items))
	for _, sb := range items {
		minted, labelled := sb.GetLabels()[SandboxIDLabel]
		mapped := labelled
		if !mapped {
			minted, mapped = a.mintedLocked(sb.GetId())
		}
		if mapped {
			sb = proto.Clone(sb).(*runtimeapi.PodSandbox)
			if mapped {
				sb.Id = minted
			}
			sb.Labels = stripLabel(sb.Labels)
		}
		out = append(out, sb)
	}
	return out
}

// editContainers shows minted sandbox ids.
func (a *asyncSandboxes) editContainers(items []*runtimeapi.Container) []*runtimeapi.Container {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*runtimeapi.Container, 0, len(items))
	for _, c := range items {
		if minted, ok := a.mintedLocked(c.GetPodSandboxId()); ok {
			c = proto.Clone(c).(*runtimeapi.Container)
			c.PodSandboxId = minted
		}
		out = append(out, c)
	}
	return out
}

// editStatus shows the minted id and hides the label.
func (a *asyncSandboxes) editStatus(resp *runtimeapi.PodSandboxStatusResponse) *runtimeapi.PodSandboxStatusResponse {
	st := resp.GetStatus()
	a.mu.Lock()
	minted, ok := a.mintedLocked(st.GetId())
	a.mu.Unlock()
	if ok {
		st.Id = minted
	}
	st.Labels = stripLabel(st.GetLabels())
	return resp
}

func (a *asyncSandboxes) editStats(st *runtimeapi.PodSandboxStats) {
	attr := st.GetAttributes()
	if attr == nil {
		return
	}
	a.mu.Lock()
	minted, ok := a.mintedLocked(attr.GetId())
	a.mu.Unlock()
	if ok {
		attr.Id = minted
	}
	attr.Labels = stripLabel(attr.GetLabels())
}

// editMetrics shows minted sandbox ids.
func (a *asyncSandboxes) editMetrics(ms []*runtimeapi.PodSandboxMetrics) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range ms {
		if minted, ok := a.mintedLocked(m.GetPodSandboxId()); ok {
			m.PodSandboxId = minted
		}
	}
}

// editEvent shows minted ids; the event is shared, so it is copied first.
func (a *asyncSandboxes) editEvent(ev *runtimeapi.ContainerEventResponse) *runtimeapi.ContainerEventResponse {
	real := ev.GetPodSandboxStatus().GetId()
	// The runtime sends a sandbox's first events before RunPodSandbox
	// returns its id to the shim: the label names the minted id already.
	minted, labelled := ev.GetPodSandboxStatus().GetLabels()[SandboxIDLabel]
	ok := labelled
	if !ok {
		a.mu.Lock()
		minted, ok = a.mintedLocked(real)
		a.mu.Unlock()
	}
	if !ok {
		return ev
	}
	ev = proto.Clone(ev).(*runtimeapi.ContainerEventResponse)
	if ok {
		if ev.ContainerId == real {
			ev.ContainerId = minted
		}
		ev.PodSandboxStatus.Id = minted
	}
	ev.PodSandboxStatus.Labels = stripLabel(ev.PodSandboxStatus.Labels)
	return ev
}
