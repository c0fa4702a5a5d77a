package pleg

import (
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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
		p.notes.post(Observation{Kind: ObservedStreamError, Err: err, RetryIn: retryIn})
	}
	p.observe()
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
	if p.staleLocked(rec, id, ev.GetCreatedAt()) {
		p.stats.StaleEvents++
		return
	}
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
