package pleg

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// entityState is the PLEG's record of one container or sandbox. CRI states
// are monotonic per id (created → running → exited → removed; a restart is
// a new id), so the record only moves forward, except between running and
// unknown, which needs a newer observation. That is what makes every exit
// reported exactly once per id, whatever order lists and events arrive in.
type entityState uint8

const (
	stateNonExistent entityState = iota
	stateCreated
	stateRunning
	stateUnknown
	stateExited
)

// reportedState is the kubelet's plegContainerState: created and unknown
// are both "unknown".
type reportedState uint8

const (
	reportedNonExistent reportedState = iota
	reportedRunning
	reportedExited
	reportedUnknown
)

func (s entityState) reported() reportedState {
	switch s {
	case stateRunning:
		return reportedRunning
	case stateExited:
		return reportedExited
	case stateCreated, stateUnknown:
		return reportedUnknown
	}
	return reportedNonExistent
}

func containerState(s runtimeapi.ContainerState) entityState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return stateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return stateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return stateExited
	}
	return stateUnknown
}

func sandboxState(s runtimeapi.PodSandboxState) entityState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return stateRunning
	}
	return stateExited
}

type entityKind uint8

const (
	kindContainer entityKind = iota
	kindSandbox
)

// entity is the record of one container or sandbox id.
type entity struct {
	kind      entityKind
	state     entityState
	sandboxID string // containers: the sandbox they belong to, if known
	// seq is the observation sequence number at which the PLEG last learned
	// the entity exists. A relist that started before (startSeq <= seq)
	// cannot prove it gone by not listing it.
	seq uint64
}

// podRecord is what the PLEG has reported about one pod.
type podRecord struct {
	uid             types.UID
	name, namespace string
	entities        map[string]*entity
	// status is the newest status the PLEG wrote to the cache.
	status *PodStatus
	// seq is the last observation sequence number that touched the pod.
	seq uint64
}

// tombstone remembers a removed id, so that late events about it are
// ignored and a wait on it is answered.
type tombstone struct {
	at   time.Time // when the PLEG learned of the removal
	uid  types.UID
	kind entityKind
	// last is the container's status in the newest pod status written
	// before its removal (nil for sandboxes, or if none was written).
	last *runtimeapi.ContainerStatus
}

// containerStatusIn returns id's status in st, or nil.
func containerStatusIn(st *PodStatus, id string) *runtimeapi.ContainerStatus {
	if st == nil {
		return nil
	}
	for _, cs := range st.ContainerStatuses {
		if cs.GetId() == id {
			return cs
		}
	}
	return nil
}

// observed is one entity as a list, an inspection or an event showed it.
type observed struct {
	kind      entityKind
	state     entityState
	sandboxID string
}

// podObservation is what one source showed about one pod.
type podObservation struct {
	uid             types.UID
	name, namespace string
	entities        map[string]observed
	// seq: the observation is at least as new as this sequence number.
	seq uint64
	// complete: recorded entities missing from entities are gone, if the
	// PLEG learned about them before seq (lists).
	complete bool
	// sandboxedOnly: the source listed containers by sandbox, so it proves
	// nothing about containers recorded without a sandbox.
	sandboxedOnly bool
	// gone holds ids that are certainly removed (DELETED events, NotFound
	// on inspection of a listed id).
	gone map[string]entityKind
}

func newObservation(uid types.UID, seq uint64, complete bool) *podObservation {
	return &podObservation{uid: uid, entities: map[string]observed{}, seq: seq, complete: complete}
}

// change is one planned transition of an entity.
type change struct {
	id        string
	kind      entityKind
	sandboxID string
	from, to  entityState
	seq       uint64
}

// applies reports whether an observation of state to (with sequence
// number seq, certain for removals) moves an entity from cur (recorded at
// curSeq). See entityState.
func applies(cur entityState, curSeq uint64, to entityState, seq uint64, certain bool) bool {
	if to == cur {
		return false
	}
	switch to {
	case stateNonExistent:
		return certain || curSeq < seq
	case stateExited:
		return true
	}
	if cur == stateExited {
		return false // terminal: stale data never revives an exited id
	}
	switch to {
	case stateRunning:
		return cur == stateNonExistent || cur == stateCreated || (cur == stateUnknown && seq > curSeq)
	case stateCreated:
		return cur == stateNonExistent
	case stateUnknown:
		return cur == stateNonExistent || cur == stateCreated || (cur == stateRunning && seq > curSeq)
	}
	return false
}

// plan computes the changes obs makes to rec (nil: no record yet),
// ignoring tombstoned ids. It does not modify anything.
func plan(rec *podRecord, obs *podObservation, tombstoned func(string) bool) []change {
	var out []change
	cur := func(id string) (entityState, uint64, string) {
		if rec != nil {
			if e, ok := rec.entities[id]; ok {
				return e.state, e.seq, e.sandboxID
			}
		}
		return stateNonExistent, 0, ""
	}
	for id, o := range obs.entities {
		if tombstoned(id) {
			continue
		}
		if _, isGone := obs.gone[id]; isGone {
			continue
		}
		st, seq, sb := cur(id)
		if o.sandboxID != "" {
			sb = o.sandboxID
		}
		if applies(st, seq, o.state, obs.seq, false) {
			out = append(out, change{id: id, kind: o.kind, sandboxID: sb, from: st, to: o.state, seq: obs.seq})
		} else if st != stateNonExistent && (obs.seq > seq || sb != cursb(rec, id)) {
			// Same (or stale) state: only remember it was seen.
			out = append(out, change{id: id, kind: o.kind, sandboxID: sb, from: st, to: st, seq: obs.seq})
		}
	}
	for id, kind := range obs.gone {
		if st, seq, sb := cur(id); applies(st, seq, stateNonExistent, obs.seq, true) {
			out = append(out, change{id: id, kind: kind, sandboxID: sb, from: st, to: stateNonExistent, seq: obs.seq})
		}
	}
	if obs.complete && rec != nil {
		for id, e := range rec.entities {
			if _, seen := obs.entities[id]; seen {
				continue
			}
			if _, isGone := obs.gone[id]; isGone {
				continue
			}
			if obs.sandboxedOnly && e.kind == kindContainer && e.sandboxID == "" {
				continue
			}
			if applies(e.state, e.seq, stateNonExistent, obs.seq, false) {
				out = append(out, change{id: id, kind: e.kind, sandboxID: e.sandboxID, from: e.state, to: stateNonExistent, seq: obs.seq})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].kind != out[j].kind {
			return out[i].kind > out[j].kind // sandboxes first
		}
		return out[i].id < out[j].id
	})
	return out
}

func cursb(rec *podRecord, id string) string {
	if rec == nil {
		return ""
	}
	if e, ok := rec.entities[id]; ok {
		return e.sandboxID
	}
	return ""
}

// hasEvents reports whether changes produce any event.
func hasEvents(changes []change) bool {
	for _, c := range changes {
		if c.from.reported() != c.to.reported() {
			return true
		}
	}
	return false
}

// eventsFor returns the kubelet's events for one transition.
func eventsFor(uid types.UID, c change) []Event {
	from, to := c.from.reported(), c.to.reported()
	if from == to {
		return nil
	}
	switch to {
	case reportedRunning:
		return []Event{{ID: uid, Type: ContainerStarted, Data: c.id}}
	case reportedExited:
		return []Event{{ID: uid, Type: ContainerDied, Data: c.id}}
	case reportedUnknown:
		return []Event{{ID: uid, Type: ContainerChanged, Data: c.id}}
	}
	if from == reportedExited {
		return []Event{{ID: uid, Type: ContainerRemoved, Data: c.id}}
	}
	return []Event{{ID: uid, Type: ContainerDied, Data: c.id}, {ID: uid, Type: ContainerRemoved, Data: c.id}}
}
