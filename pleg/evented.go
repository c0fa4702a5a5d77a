package pleg

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// backoff is a jittered exponential backoff that never gives up.
type backoff struct {
	initial, max, cur time.Duration
}

// next returns the next wait, in [d/2, d] for the current step d.
func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.initial
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	half := b.cur / 2
	return half + time.Duration(rand.Int64N(int64(b.cur-half)+1))
}

func (b *backoff) reset() { b.cur = 0 }

// streamLoop keeps the event stream open: on every failure it reconnects
// after a jittered exponential backoff, forever.
func (p *PLEG) streamLoop(ctx context.Context) {
	bo := backoff{initial: p.cfg.reconnectInitial, max: p.cfg.reconnectMax}
	for {
		began := p.clock.Now()
		n, err := p.streamOnce(ctx)
		if ctx.Err() != nil {
			p.streamDown(nil, 0)
			return
		}
		if n > 0 || p.clock.Since(began) >= p.cfg.reconnectMax {
			bo.reset()
		}
		wait := bo.next()
		p.streamDown(err, wait)
		t := p.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// streamOnce runs one GetContainerEvents call and handles its events until
// it returns or closes the channel. It returns how many events it handled
// and why it ended.
func (p *PLEG) streamOnce(ctx context.Context) (int, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, 128)
	done := make(chan error, 1)
	go func() {
		done <- p.rt.GetContainerEvents(sctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { p.streamConnected() })
	}()
	n := 0
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				// The runtime closed the channel: the stream is over even if
				// GetContainerEvents has not returned. Make it return.
				cancel()
				err := <-done
				if err == nil || (errors.Is(err, context.Canceled) && ctx.Err() == nil) {
					err = errEventsChannelClosed
				}
				return n, err
			}
			p.handleEvent(ev)
			n++
		case err := <-done:
			n += p.handleQueued(ch) // sent before the return
			if err == nil {
				err = errStreamEnded
			}
			return n, err
		case <-ctx.Done():
			cancel()
			for {
				select {
				case _, ok := <-ch: // the runtime may block sending until it sees ctx
					if !ok {
						ch = nil // closed: wait for done only
					}
				case err := <-done:
					return n, err
				}
			}
		}
	}
}

// handleQueued handles the events waiting in ch, up to an empty or closed
// channel, and returns how many it handled.
func (p *PLEG) handleQueued(ch chan *runtimeapi.ContainerEventResponse) int {
	n := 0
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return n
			}
			p.handleEvent(ev)
			n++
		default:
			return n
		}
	}
}

// streamConnected records that the stream is up and asks for a reconcile
// relist: events may have been missed while it was down. The PLEG enters
// evented mode once that relist succeeds.
func (p *PLEG) streamConnected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.streamConnectedLocked()
}

func (p *PLEG) streamConnectedLocked() {
	if p.streamUp {
		return
	}
	p.streamUp = true
	p.streamGen++
	p.streamErr = nil
	p.stats.StreamConnects++
	p.markActiveLocked(p.clock.Now())
	p.requestReconcileLocked()
	p.log.Info("pleg event stream connected")
}

// streamDown records a stream failure and falls back to relisting.
func (p *PLEG) streamDown(err error, retryIn time.Duration) {
	p.mu.Lock()
	wasUp := p.streamUp
	p.streamUp = false
	if err != nil {
		p.streamErr = err
		p.stats.StreamErrors++
	}
	p.setModeLocked(ModeRelisting, err)
	if wasUp && err != nil {
		p.requestReconcileLocked() // relist now: events may be lost
	}
	p.mu.Unlock()
	if err != nil {
		p.log.Warn("pleg event stream failed; reconnecting", zap.Error(err), zap.Duration("retryIn", retryIn))
		obs := p.cfg.observer
		p.notes.post(func() { obs.StreamError(err, retryIn) })
	}
}

func eventState(t runtimeapi.ContainerEventType) entityState {
	switch t {
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		return stateCreated
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		return stateRunning
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		return stateExited
	}
	return stateNonExistent
}

// advanced returns the later of two states of one id (created < running,
// unknown < exited).
func advanced(a, b entityState) entityState {
	rank := func(s entityState) int {
		switch s {
		case stateCreated:
			return 1
		case stateRunning, stateUnknown:
			return 2
		case stateExited:
			return 3
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// handleEvent applies one runtime event. An event with usable statuses
// updates the records and the cache (time = the event's CreatedAt) and
// delivers its events; one without (no sandbox status, or a container
// status missing, as containerd 2.0 sent them) makes the pod be relisted
// instead, so an empty status never overwrites a good one.
func (p *PLEG) handleEvent(ev *runtimeapi.ContainerEventResponse) {
	if ev == nil {
		return
	}
	now := p.clock.Now()
	p.mu.Lock()
	p.handleEventLocked(ev, now)
	p.mu.Unlock()
	p.flush()
}

func (p *PLEG) handleEventLocked(ev *runtimeapi.ContainerEventResponse, now time.Time) {
	p.streamConnectedLocked() // for a runtime that never calls the callback
	p.stats.RuntimeEvents++
	p.markActiveLocked(now)
	id := ev.GetContainerId()
	sb := ev.GetPodSandboxStatus()
	uid := types.UID(sb.GetMetadata().GetUid())
	if uid == "" {
		uid = p.owner[id]
	}
	if id == "" || uid == "" {
		p.stats.IncompleteEvents++
		p.requestReconcileLocked()
		return
	}
	if p.tombstonedLocked(id) {
		p.stats.StaleEvents++
		return
	}
	rec := p.pods[uid]
	kind := kindContainer
	if sb != nil && sb.GetId() == id {
		kind = kindSandbox
	} else if rec != nil && rec.entities[id] != nil {
		kind = rec.entities[id].kind
	}
	typ := ev.GetContainerEventType()
	statuses := map[string]*runtimeapi.ContainerStatus{}
	for _, cs := range ev.GetContainersStatuses() {
		if cs.GetId() != "" {
			statuses[cs.GetId()] = cs
		}
	}
	if !p.eventComplete(rec, id, kind, typ, sb, statuses) {
		p.stats.IncompleteEvents++
		p.pending[uid] = struct{}{}
		p.reinspect[uid] = struct{}{} // retried if the pod relist fails
		signal(p.wakePods)
		return
	}

	seq := p.nextSeqLocked()
	obs := newObservation(uid, seq, false)
	if md := sb.GetMetadata(); md != nil {
		obs.name, obs.namespace = md.GetName(), md.GetNamespace()
	}
	if kind != kindSandbox {
		obs.entities[sb.GetId()] = observed{kind: kindSandbox, state: sandboxState(sb.GetState())}
	}
	for cid, cs := range statuses {
		if cid != id && !p.tombstonedLocked(cid) {
			obs.entities[cid] = observed{kind: kindContainer, state: containerState(cs.GetState()), sandboxID: sb.GetId()}
		}
	}
	sandboxID := sb.GetId()
	if kind == kindSandbox {
		sandboxID = ""
	}
	if typ == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
		obs.gone = map[string]entityKind{id: kind}
	} else {
		st := eventState(typ)
		if kind == kindSandbox {
			st = advanced(st, sandboxState(sb.GetState()))
		} else if cs := statuses[id]; cs != nil {
			st = advanced(st, containerState(cs.GetState()))
		}
		obs.entities[id] = observed{kind: kind, state: st, sandboxID: sandboxID}
	}
	prev := p.pods[uid]
	touchedAfter := prev != nil && prev.seq >= seq
	changes := plan(prev, obs, p.tombstonedLocked)
	rec = p.recordLocked(obs)
	evs := p.commitLocked(rec, changes)
	if kind == kindSandbox && typ == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT && len(rec.entities) > 0 {
		// Containers of the pod are still recorded: check them.
		p.pending[uid] = struct{}{}
		signal(p.wakePods)
	}
	if len(rec.entities) == 0 {
		p.forgetLocked(rec, touchedAfter)
	} else {
		ts := now
		if ev.GetCreatedAt() > 0 {
			ts = time.Unix(0, ev.GetCreatedAt())
		}
		if rec.status == nil || !ts.Before(rec.status.Timestamp) {
			p.writeStatusLocked(rec, mergeStatus(rec, sb, statuses, ts))
		}
		p.verifyLocked(rec)
	}
	p.publishLocked(evs)
}

// eventComplete reports whether an event carries enough to write the
// pod's status: a sandbox status, the status of the event's container
// (unless it was deleted), and the status of every container the PLEG
// knows in that sandbox.
func (p *PLEG) eventComplete(rec *podRecord, id string, kind entityKind, typ runtimeapi.ContainerEventType, sb *runtimeapi.PodSandboxStatus, statuses map[string]*runtimeapi.ContainerStatus) bool {
	if sb == nil || sb.GetId() == "" {
		return false
	}
	deleted := typ == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
	if kind == kindContainer && !deleted && statuses[id] == nil {
		return false
	}
	if rec != nil && !(kind == kindSandbox && deleted) {
		for eid, e := range rec.entities {
			if e.kind == kindContainer && e.sandboxID == sb.GetId() && eid != id && statuses[eid] == nil {
				return false
			}
		}
	}
	return true
}

// mergeStatus builds the pod's status after an event: the newest status
// written, with the event's sandbox and container statuses replacing or
// adding theirs, restricted to the ids the record still has.
func mergeStatus(rec *podRecord, sb *runtimeapi.PodSandboxStatus, cs map[string]*runtimeapi.ContainerStatus, ts time.Time) *PodStatus {
	sbs := map[string]*runtimeapi.PodSandboxStatus{}
	cts := map[string]*runtimeapi.ContainerStatus{}
	if base := rec.status; base != nil {
		for _, s := range base.SandboxStatuses {
			sbs[s.GetId()] = s
		}
		for _, s := range base.ContainerStatuses {
			cts[s.GetId()] = s
		}
	}
	sbs[sb.GetId()] = sb
	for id, s := range cs {
		cts[id] = s
	}
	st := &PodStatus{ID: rec.uid, Name: rec.name, Namespace: rec.namespace, Timestamp: ts}
	for id, s := range sbs {
		if _, ok := rec.entities[id]; ok {
			st.SandboxStatuses = append(st.SandboxStatuses, s)
		}
	}
	for id, s := range cts {
		if _, ok := rec.entities[id]; ok {
			st.ContainerStatuses = append(st.ContainerStatuses, s)
		}
	}
	sortStatus(st)
	return st
}
