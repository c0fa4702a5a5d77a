package pleg

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// waitRemoved is the target of WaitContainerRemoved, beside the CRI states
// WaitContainerState takes.
const waitRemoved runtimeapi.ContainerState = -1

// waiter is one blocked WaitContainerState or WaitContainerRemoved. Its
// fields are guarded by p.mu; done is closed once status and err are final.
type waiter struct {
	method string
	uid    types.UID
	id     string
	want   runtimeapi.ContainerState
	done   chan struct{}

	// ready: the records satisfy the wait; it ends once the outbox items
	// queued up to target are carried out (the cache written, the events
	// delivered).
	ready  bool
	target uint64
	status *runtimeapi.ContainerStatus
	err    error
}

// WaitContainerState blocks until the PLEG has seen container containerID
// of pod uid in state or past it, and returns the container's status from
// the newest pod status the PLEG wrote to the Cache. state is one of
// CONTAINER_CREATED (any status at all), CONTAINER_RUNNING (running, or
// exited: the container can no longer become running; the status's
// StartedAt tells whether it ran) and CONTAINER_EXITED (its ExitCode is in
// the status).
//
// It relies on what the PLEG observes, not on the cache's global time, so
// it ends as soon as a runtime event (evented mode) or a relist (relisting
// mode) shows the state; it asks the runtime nothing itself.
//
// Guarantees:
//   - No lost wake-up: a state reached before the call is seen by it.
//   - When it returns the status, the Cache already holds that pod status,
//     and the events of the observation that showed the state
//     (ContainerStarted, ContainerDied) have been delivered on Watch (or
//     dropped there, owing the pod a PodSync) and to every Subscription.
//   - A container removed before the PLEG saw it in state returns an error
//     wrapping ErrRemoved; one removed after returns its last status. The
//     PLEG remembers removed ids for DefaultTombstoneTTL.
//   - Close makes it return ErrClosed, and a done ctx ctx.Err().
//   - A nil ctx, an empty uid or containerID, another state, a containerID
//     the PLEG knows in another pod or as a sandbox, or a PLEG not made by
//     New is an *ArgError.
//
// A container the PLEG never sees (it does not exist, or it was created and
// removed between two relists with no event) keeps the wait until ctx ends:
// give ctx a deadline. It must not be called from the Cache or the
// observer: the wait ends on the goroutines that call them.
func (p *PLEG) WaitContainerState(ctx context.Context, uid types.UID, containerID string, state runtimeapi.ContainerState) (*runtimeapi.ContainerStatus, error) {
	const method = "WaitContainerState"
	if !p.made() {
		return nil, errNotNew(method)
	}
	switch state {
	case runtimeapi.ContainerState_CONTAINER_CREATED, runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED:
	default:
		return nil, &ArgError{Method: method, Arg: "state", Reason: "must be CONTAINER_CREATED, CONTAINER_RUNNING or CONTAINER_EXITED, not " + state.String()}
	}
	return p.wait(ctx, method, uid, containerID, state)
}

// WaitContainerRemoved blocks until the PLEG has seen container containerID
// of pod uid removed, and returns the container's last status the PLEG
// wrote to the Cache (nil if it wrote none). It has the guarantees of
// WaitContainerState: no lost wake-up (within DefaultTombstoneTTL of the
// removal), the ContainerRemoved event delivered before it returns,
// ErrClosed on Close, ctx.Err() when ctx is done, an *ArgError for a bad
// argument; and, like it, waits until ctx ends for a container the PLEG
// never sees.
func (p *PLEG) WaitContainerRemoved(ctx context.Context, uid types.UID, containerID string) (*runtimeapi.ContainerStatus, error) {
	return p.wait(ctx, "WaitContainerRemoved", uid, containerID, waitRemoved)
}

func (p *PLEG) wait(ctx context.Context, method string, uid types.UID, id string, want runtimeapi.ContainerState) (*runtimeapi.ContainerStatus, error) {
	switch {
	case !p.made():
		return nil, errNotNew(method)
	case ctx == nil:
		return nil, &ArgError{Method: method, Arg: "ctx", Reason: "must not be nil"}
	case uid == "":
		return nil, &ArgError{Method: method, Arg: "uid", Reason: "must not be empty"}
	case id == "":
		return nil, &ArgError{Method: method, Arg: "containerID", Reason: "must not be empty"}
	}
	w := &waiter{method: method, uid: uid, id: id, want: want, done: make(chan struct{})}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if p.checkWaiterLocked(w); w.ready && w.target <= p.flushed {
		p.mu.Unlock()
		return w.status, w.err
	}
	p.waiters[w] = struct{}{}
	p.mu.Unlock()

	select {
	case <-w.done:
	case <-ctx.Done():
		p.mu.Lock()
		_, waiting := p.waiters[w]
		delete(p.waiters, w)
		p.mu.Unlock()
		if waiting {
			return nil, ctx.Err()
		}
		<-w.done // ended meanwhile: its answer stands
	}
	return w.status, w.err
}

// checkWaiterLocked marks w ready if what the PLEG recorded answers it: the
// answer is final once the outbox items queued so far are carried out.
func (p *PLEG) checkWaiterLocked(w *waiter) {
	if w.ready {
		return
	}
	ok, status, err := p.answerLocked(w)
	if !ok {
		return
	}
	w.ready, w.target, w.status, w.err = true, p.queued, status, err
}

// answerLocked returns the answer to w, if the records hold one.
func (p *PLEG) answerLocked(w *waiter) (bool, *runtimeapi.ContainerStatus, error) {
	elsewhere := func(owner types.UID) error {
		return &ArgError{Method: w.method, Arg: "containerID", Reason: "belongs to pod " + string(owner) + ", not " + string(w.uid)}
	}
	sandbox := func() error {
		return &ArgError{Method: w.method, Arg: "containerID", Reason: "is a sandbox, not a container"}
	}
	if tb, ok := p.tombstones[w.id]; ok {
		switch {
		case tb.uid != w.uid:
			return true, nil, elsewhere(tb.uid)
		case tb.kind == kindSandbox:
			return true, nil, sandbox()
		case w.want == waitRemoved || reaches(tb.last, w.want):
			return true, tb.last, nil
		}
		return true, nil, &removedError{uid: w.uid, id: w.id, want: strings.ToLower(strings.TrimPrefix(w.want.String(), "CONTAINER_"))}
	}
	if owner, ok := p.owner[w.id]; ok && owner != w.uid {
		return true, nil, elsewhere(owner)
	}
	rec := p.pods[w.uid]
	if rec == nil {
		return false, nil, nil
	}
	if e := rec.entities[w.id]; e != nil && e.kind == kindSandbox {
		return true, nil, sandbox()
	}
	if w.want == waitRemoved {
		return false, nil, nil
	}
	if cs := containerStatusIn(rec.status, w.id); reaches(cs, w.want) {
		return true, cs, nil
	}
	return false, nil, nil
}

// reaches reports whether cs shows its container in want or past it. CRI
// states only move forward per id (created → running → exited), so past
// running is exited, or unknown after it started.
func reaches(cs *runtimeapi.ContainerStatus, want runtimeapi.ContainerState) bool {
	if cs == nil {
		return false
	}
	switch want {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return true
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		st := cs.GetState()
		return st == runtimeapi.ContainerState_CONTAINER_RUNNING || st == runtimeapi.ContainerState_CONTAINER_EXITED || cs.GetStartedAt() != 0
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return cs.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED
	}
	return false
}

// wakeWaitersLocked ends the waits whose answer is final. flush calls it
// each time it takes a batch, so a wait ends after the cache writes and
// events decided with its answer.
func (p *PLEG) wakeWaitersLocked() {
	for w := range p.waiters {
		p.checkWaiterLocked(w)
		if w.ready && w.target <= p.flushed {
			p.endWaitLocked(w, w.status, w.err)
		}
	}
}

func (p *PLEG) endWaitLocked(w *waiter, status *runtimeapi.ContainerStatus, err error) {
	delete(p.waiters, w)
	w.status, w.err = status, err
	close(w.done)
}
