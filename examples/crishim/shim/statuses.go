package shim

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/criclient/runtimeview"
)

// DefaultWriteWait is how long a read waits for the runtime's event of a
// mutation made through the shim before it falls back (see
// Config.WriteWait).
const DefaultWriteWait = 500 * time.Millisecond

// statusPrunePeriod is how often records of objects the view no longer
// lists are dropped, for objects whose DELETED event was lost.
const statusPrunePeriod = 30 * time.Second

type objKind int

const (
	objSandbox objKind = iota
	objContainer
)

type objKey struct {
	kind objKind
	id   string
}

// The ranks order the states an object goes through, never backwards: a
// container is created, runs, may become unknown (containerd's UNKNOWN only
// ends in EXITED), exits; a sandbox is ready, then not ready. An
// observation of a lower rank than one already held is older and is
// ignored, so a late event cannot undo a newer one.
func containerRank(s runtimeapi.ContainerState) int {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return 0
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return 1
	case runtimeapi.ContainerState_CONTAINER_UNKNOWN:
		return 2
	default: // EXITED
		return 3
	}
}

func sandboxRank(s runtimeapi.PodSandboxState) int {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return 0
	}
	return 1
}

type sandboxRecord struct {
	st    *runtimeapi.PodSandboxStatus
	valid bool // false: a write changed it in a way no event reports
}

type containerRecord struct {
	st        *runtimeapi.ContainerStatus
	sandboxID string
	valid     bool
}

// pendingWrite is a mutation made through the shim whose effect the shim
// has not observed yet: the object must reach rank.
type pendingWrite struct {
	rank      int
	seq       uint64
	sandboxID string // a container's sandbox, when the writer knew it
}

// statuses holds the last full status of every sandbox and container the
// shim saw, from the runtime's events (each carries the pod's sandbox
// status and all its container statuses) and from the status calls it
// forwarded. It also tracks the shim's own mutations until their event
// arrives, which is what makes reads after them see them without asking
// the runtime.
type statuses struct {
	s         *Shim
	clk       clock.WithTicker
	writeWait time.Duration

	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	live       bool // subscribed to the view's events: pending writes will be observed
	seq        uint64
	sandboxes  map[string]*sandboxRecord
	containers map[string]*containerRecord
	pending    map[objKey]pendingWrite
	changed    chan struct{} // closed and replaced when pending shrinks or live changes
}

func newStatuses(s *Shim, clk clock.WithTicker, writeWait time.Duration) *statuses {
	st := &statuses{
		s: s, clk: clk, writeWait: writeWait,
		sandboxes:  map[string]*sandboxRecord{},
		containers: map[string]*containerRecord{},
		pending:    map[objKey]pendingWrite{},
		changed:    make(chan struct{}),
	}
	st.life, st.cancel = context.WithCancel(context.Background())
	st.wg.Add(2)
	go st.follow()
	go st.prune()
	return st
}

func (st *statuses) close() {
	st.cancel()
	st.wg.Wait()
}

func (st *statuses) broadcastLocked() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// follow subscribes to the view's events, applies them, and subscribes
// again when a subscription ends (the view re-opens the runtime's stream).
func (st *statuses) follow() {
	defer st.wg.Done()
	for {
		sub, err := st.s.view.Subscribe(st.life, runtimeview.DefaultBuffer)
		if err != nil {
			return // the shim is closing
		}
		st.mu.Lock()
		st.live = true
		st.broadcastLocked()
		st.mu.Unlock()
		if !st.drain(sub) {
			_ = sub.Close()
			return
		}
		st.lost(sub.Err())
		_ = sub.Close()
	}
}

// drain applies sub's events until it ends (true) or the shim closes.
func (st *statuses) drain(sub *runtimeview.Subscription) bool {
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return true
			}
			st.apply(ev)
		case <-st.life.Done():
			return false
		}
	}
}

// lost hands every pending write to the view: with events missing, only a
// status call or a relist can confirm it.
func (st *statuses) lost(err error) {
	st.mu.Lock()
	st.live = false
	pend := st.pending
	st.pending = map[objKey]pendingWrite{}
	st.broadcastLocked()
	st.mu.Unlock()
	if st.life.Err() == nil {
		st.s.log.Debug("event subscription ended; pending writes confirmed by status calls", zap.Error(err), zap.Int("pending", len(pend)))
	}
	for k, p := range pend {
		st.handToView(k, p.sandboxID)
	}
}

func (st *statuses) handToView(k objKey, sandboxID string) {
	st.mu.Lock()
	if k.kind == objSandbox {
		if r := st.sandboxes[k.id]; r != nil {
			r.valid = false
		}
	} else if r := st.containers[k.id]; r != nil {
		r.valid = false
		if sandboxID == "" {
			sandboxID = r.sandboxID
		}
	}
	st.mu.Unlock()
	if k.kind == objSandbox {
		st.s.view.SandboxChanged(k.id)
	} else {
		st.s.view.ContainerChanged(k.id, sandboxID)
	}
}

func (st *statuses) apply(ev *runtimeapi.ContainerEventResponse) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ps := ev.GetPodSandboxStatus()
	sandboxID := ps.GetId()
	deleted := ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
	if deleted && sandboxID != "" && ev.GetContainerId() == sandboxID {
		st.removeSandboxLocked(sandboxID)
		return
	}
	if sandboxID != "" {
		st.putSandboxLocked(ps)
	}
	for _, cs := range ev.GetContainersStatuses() {
		if cs.GetId() == "" || (deleted && cs.GetId() == ev.GetContainerId()) {
			continue
		}
		st.putContainerLocked(cs, sandboxID)
	}
	if deleted {
		st.removeContainerLocked(ev.GetContainerId())
	}
}

func (st *statuses) putSandboxLocked(ps *runtimeapi.PodSandboxStatus) {
	r := st.sandboxes[ps.GetId()]
	rank := sandboxRank(ps.GetState())
	if r != nil && sandboxRank(r.st.GetState()) > rank {
		return
	}
	st.sandboxes[ps.GetId()] = &sandboxRecord{st: ps, valid: true}
	st.settleLocked(objKey{objSandbox, ps.GetId()}, rank)
}

func (st *statuses) putContainerLocked(cs *runtimeapi.ContainerStatus, sandboxID string) {
	r := st.containers[cs.GetId()]
	rank := containerRank(cs.GetState())
	if r != nil {
		if containerRank(r.st.GetState()) > rank {
			return
		}
		if sandboxID == "" {
			sandboxID = r.sandboxID
		}
	}
	st.containers[cs.GetId()] = &containerRecord{st: cs, sandboxID: sandboxID, valid: true}
	st.settleLocked(objKey{objContainer, cs.GetId()}, rank)
}

func (st *statuses) settleLocked(k objKey, rank int) {
	if p, ok := st.pending[k]; ok && rank >= p.rank {
		delete(st.pending, k)
		st.broadcastLocked()
	}
}

func (st *statuses) removeSandboxLocked(id string) {
	delete(st.sandboxes, id)
	st.settleLocked(objKey{objSandbox, id}, 1<<30)
	for cid, r := range st.containers {
		if r.sandboxID == id {
			st.removeContainerLocked(cid)
		}
	}
}

func (st *statuses) removeContainerLocked(id string) {
	delete(st.containers, id)
	st.settleLocked(objKey{objContainer, id}, 1<<30)
}

// wrote records a mutation of k made through the shim that returned: the
// object must now be at rank or beyond. With the event subscription live
// the event is awaited (reads that begin later wait for it, up to
// writeWait); otherwise, or when the call failed (what it changed is
// unknown), the view confirms it with a status call, as it does for any
// mutation, and the next status read is forwarded.
func (st *statuses) wrote(k objKey, sandboxID string, rank int, err error) {
	if k.id == "" {
		return
	}
	st.mu.Lock()
	if st.live && err == nil {
		if k.kind == objContainer && sandboxID != "" {
			if r := st.containers[k.id]; r != nil && r.sandboxID == "" {
				r.sandboxID = sandboxID
			}
		}
		if st.rankLocked(k) < rank {
			st.seq++
			st.pending[k] = pendingWrite{rank: rank, seq: st.seq, sandboxID: sandboxID}
		}
		st.mu.Unlock()
		return
	}
	st.mu.Unlock()
	st.handToView(k, sandboxID)
}

// changedUnseen is wrote for a mutation no event reports
// (UpdateContainerResources): the view confirms it and the next status
// read is forwarded.
func (st *statuses) changedUnseen(k objKey, sandboxID string) {
	if k.id != "" {
		st.handToView(k, sandboxID)
	}
}

// rankLocked is the rank held for k, -1 when unknown.
func (st *statuses) rankLocked(k objKey) int {
	if k.kind == objSandbox {
		if r := st.sandboxes[k.id]; r != nil {
			return sandboxRank(r.st.GetState())
		}
		return -1
	}
	if r := st.containers[k.id]; r != nil {
		return containerRank(r.st.GetState())
	}
	return -1
}

// runningIn lists the containers of sandbox id that run, or may: stopping
// the sandbox stops them.
func (st *statuses) runningIn(id string) []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []string
	for cid, r := range st.containers {
		if r.sandboxID == id && containerRank(r.st.GetState()) < 3 && r.st.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED {
			out = append(out, cid)
		}
	}
	return out
}

// removed forgets an object the shim removed.
func (st *statuses) removed(k objKey) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if k.kind == objSandbox {
		st.removeSandboxLocked(k.id)
	} else {
		st.removeContainerLocked(k.id)
	}
}

// awaitWrites waits until the pending writes that match (all when only is
// nil) and were made before the call have been observed, for at most
// writeWait. Those still pending then are handed to the view, whose reads
// wait for its status calls instead.
func (st *statuses) awaitWrites(ctx context.Context, only *objKey) error {
	st.mu.Lock()
	begun := st.seq
	st.mu.Unlock()
	var timeout <-chan time.Time
	var began time.Time
	for {
		st.mu.Lock()
		var left []objKey
		for k, p := range st.pending {
			if p.seq <= begun && (only == nil || k == *only) {
				left = append(left, k)
			}
		}
		if len(left) == 0 {
			st.mu.Unlock()
			if timeout != nil {
				st.s.waits.wroteWait(st.clk.Since(began), false)
			}
			return nil
		}
		changed := st.changed
		st.mu.Unlock()
		if timeout == nil {
			t := st.clk.NewTimer(st.writeWait)
			defer t.Stop()
			timeout, began = t.C(), st.clk.Now()
		}
		select {
		case <-changed:
		case <-timeout:
			st.mu.Lock()
			handed := make(map[objKey]pendingWrite, len(left))
			for _, k := range left {
				if p, ok := st.pending[k]; ok {
					handed[k] = p
					delete(st.pending, k)
				}
			}
			st.mu.Unlock()
			// A container's sandbox lets the view confirm it with one
			// status call instead of a relist.
			for k, p := range handed {
				st.handToView(k, p.sandboxID)
				st.s.waits.unseen(writeName(k, p.rank))
			}
			st.s.waits.wroteWait(st.clk.Since(began), true)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-st.life.Done():
			return runtimeview.ErrClosed
		}
	}
}

// writeName names the mutation a pending write stands for, by what it
// must reach.
func writeName(k objKey, rank int) string {
	if k.kind == objSandbox {
		if rank == sandboxRank(runtimeapi.PodSandboxState_SANDBOX_READY) {
			return "RunPodSandbox"
		}
		return "StopPodSandbox"
	}
	switch rank {
	case containerRank(runtimeapi.ContainerState_CONTAINER_CREATED):
		return "CreateContainer"
	case containerRank(runtimeapi.ContainerState_CONTAINER_RUNNING):
		return "StartContainer"
	default:
		return "StopContainer"
	}
}

// sandbox returns a copy of the held status of sandbox id when it is
// valid, at least as new as the view's rank, and no write is pending.
func (st *statuses) sandbox(id string, viewRank int) (*runtimeapi.PodSandboxStatus, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.sandboxes[id]
	if r == nil || !r.valid || sandboxRank(r.st.GetState()) < viewRank {
		return nil, false
	}
	if _, ok := st.pending[objKey{objSandbox, id}]; ok {
		return nil, false
	}
	return proto.Clone(r.st).(*runtimeapi.PodSandboxStatus), true
}

func (st *statuses) container(id string, viewRank int) (*runtimeapi.ContainerStatus, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.containers[id]
	if r == nil || !r.valid || containerRank(r.st.GetState()) < viewRank {
		return nil, false
	}
	if _, ok := st.pending[objKey{objContainer, id}]; ok {
		return nil, false
	}
	return proto.Clone(r.st).(*runtimeapi.ContainerStatus), true
}

// fetchedSandbox stores the answer of a forwarded status call.
func (st *statuses) fetchedSandbox(ps *runtimeapi.PodSandboxStatus) {
	if ps.GetId() == "" {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.putSandboxLocked(proto.Clone(ps).(*runtimeapi.PodSandboxStatus))
}

func (st *statuses) fetchedContainer(cs *runtimeapi.ContainerStatus, sandboxID string) {
	if cs.GetId() == "" {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.putContainerLocked(proto.Clone(cs).(*runtimeapi.ContainerStatus), sandboxID)
}

// prune drops the records of objects the view no longer lists.
func (st *statuses) prune() {
	defer st.wg.Done()
	t := st.clk.NewTicker(statusPrunePeriod)
	defer t.Stop()
	for {
		select {
		case <-st.life.Done():
			return
		case <-t.C():
		}
		ctx, cancel := context.WithTimeout(st.life, time.Second)
		sbs, err1 := st.s.view.ListPodSandbox(ctx, nil)
		cs, err2 := st.s.view.ListContainers(ctx, nil)
		cancel()
		if err1 != nil || err2 != nil {
			continue
		}
		listed := make(map[string]bool, len(sbs)+len(cs))
		for _, sb := range sbs {
			listed[sb.GetId()] = true
		}
		for _, c := range cs {
			listed[c.GetId()] = true
		}
		st.mu.Lock()
		for id := range st.sandboxes {
			if !listed[id] {
				delete(st.sandboxes, id)
			}
		}
		for id := range st.containers {
			if !listed[id] {
				delete(st.containers, id)
			}
		}
		st.mu.Unlock()
	}
}
