package pleg

import (
	"context"
	"errors"
	"sort"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Kubelet labels used to attribute a container whose sandbox is not listed.
const (
	labelPodUID       = "io.kubernetes.pod.uid"
	labelPodName      = "io.kubernetes.pod.name"
	labelPodNamespace = "io.kubernetes.pod.namespace"
)

// group turns a listing into one observation per pod. A container belongs
// to the pod of its sandbox or, when its sandbox is not listed, to the pod
// of its io.kubernetes.pod.uid label; containers with neither are skipped.
func group(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container, seq uint64) map[types.UID]*podObservation {
	out := map[types.UID]*podObservation{}
	get := func(uid types.UID) *podObservation {
		o := out[uid]
		if o == nil {
			o = newObservation(uid, seq, true)
			out[uid] = o
		}
		return o
	}
	sbPod := map[string]types.UID{}
	for _, sb := range sbs {
		md := sb.GetMetadata()
		if sb.GetId() == "" || md.GetUid() == "" {
			continue
		}
		uid := types.UID(md.GetUid())
		sbPod[sb.GetId()] = uid
		o := get(uid)
		o.name, o.namespace = md.GetName(), md.GetNamespace()
		o.entities[sb.GetId()] = observed{kind: kindSandbox, state: sandboxState(sb.GetState())}
	}
	for _, c := range cs {
		if c.GetId() == "" {
			continue
		}
		uid, ok := sbPod[c.GetPodSandboxId()]
		if !ok {
			uid = types.UID(c.GetLabels()[labelPodUID])
			if uid == "" {
				continue
			}
		}
		o := get(uid)
		if o.name == "" {
			o.name, o.namespace = c.GetLabels()[labelPodName], c.GetLabels()[labelPodNamespace]
		}
		o.entities[c.GetId()] = observed{kind: kindContainer, state: containerState(c.GetState()), sandboxID: c.GetPodSandboxId()}
	}
	return out
}

// inspection is the result of inspecting one pod.
type inspection struct {
	obs    *podObservation
	status *PodStatus
	err    error
}

func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// inspect asks the runtime for the status of every sandbox and container of
// obs. The observation is updated with the inspected (fresher) states; an
// id the runtime no longer knows (NotFound) is marked gone.
func (p *PLEG) inspect(ctx context.Context, obs *podObservation, ts time.Time) inspection {
	st := &PodStatus{ID: obs.uid, Name: obs.name, Namespace: obs.namespace, Timestamp: ts}
	ids := make([]string, 0, len(obs.entities))
	for id := range obs.entities {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		ki, kj := obs.entities[ids[i]].kind, obs.entities[ids[j]].kind
		if ki != kj {
			return ki > kj
		}
		return ids[i] < ids[j]
	})
	fail := func(method, id string, err error) inspection {
		return inspection{obs: obs, err: &InspectError{UID: obs.uid, Method: method, ID: id, Err: err}}
	}
	gone := func(id string, kind entityKind) {
		if obs.gone == nil {
			obs.gone = map[string]entityKind{}
		}
		obs.gone[id] = kind
		delete(obs.entities, id)
	}
	for _, id := range ids {
		o := obs.entities[id]
		if o.kind == kindSandbox {
			resp, err := p.rt.PodSandboxStatus(ctx, id, false)
			if isNotFound(err) {
				gone(id, kindSandbox)
				continue
			}
			if err == nil && resp.GetStatus() == nil {
				err = errors.New("runtime returned no status")
			}
			if err != nil {
				return fail("PodSandboxStatus", id, err)
			}
			s := resp.GetStatus()
			st.SandboxStatuses = append(st.SandboxStatuses, s)
			o.state = sandboxState(s.GetState())
			obs.entities[id] = o
			if st.Name == "" && s.GetMetadata() != nil {
				st.Name, st.Namespace = s.GetMetadata().GetName(), s.GetMetadata().GetNamespace()
			}
			continue
		}
		resp, err := p.rt.ContainerStatus(ctx, id, false)
		if isNotFound(err) {
			gone(id, kindContainer)
			continue
		}
		if err == nil && resp.GetStatus() == nil {
			err = errors.New("runtime returned no status")
		}
		if err != nil {
			return fail("ContainerStatus", id, err)
		}
		s := resp.GetStatus()
		st.ContainerStatuses = append(st.ContainerStatuses, s)
		o.state = containerState(s.GetState())
		obs.entities[id] = o
	}
	sortStatus(st)
	return inspection{obs: obs, status: st}
}

func sortStatus(st *PodStatus) {
	sort.Slice(st.SandboxStatuses, func(i, j int) bool {
		a, b := st.SandboxStatuses[i], st.SandboxStatuses[j]
		if a.GetCreatedAt() != b.GetCreatedAt() {
			return a.GetCreatedAt() > b.GetCreatedAt()
		}
		return a.GetId() < b.GetId()
	})
	sort.Slice(st.ContainerStatuses, func(i, j int) bool {
		a, b := st.ContainerStatuses[i], st.ContainerStatuses[j]
		if a.GetCreatedAt() != b.GetCreatedAt() {
			return a.GetCreatedAt() > b.GetCreatedAt()
		}
		return a.GetId() < b.GetId()
	})
}

// inspectAll inspects pods in parallel, at most cfg.parallelism at once
// (0: all at once).
func (p *PLEG) inspectAll(ctx context.Context, obs []*podObservation, ts time.Time) []inspection {
	out := make([]inspection, len(obs))
	var g errgroup.Group
	g.SetLimit(p.cfg.inspectLimit())
	for i, o := range obs {
		g.Go(func() error {
			out[i] = p.inspect(ctx, o, ts)
			return nil
		})
	}
	_ = g.Wait() // every inspection reports its own error
	return out
}

// commitInspectionLocked applies an inspection: on success the pod's
// changes are committed, the cache write with ts queued and the events
// returned; on failure the error is queued for the cache, the pod is remembered for
// reinspection and nothing is committed (its events are recomputed next
// time).
func (p *PLEG) commitInspectionLocked(in inspection, ts time.Time) []Event {
	uid := in.obs.uid
	p.stats.Inspections++
	if in.err != nil {
		p.stats.InspectionFailures++
		p.reinspect[uid] = struct{}{}
		p.setLocked(uid, &PodStatus{ID: uid, Name: in.obs.name, Namespace: in.obs.namespace, Timestamp: ts}, in.err, ts)
		p.log.Warn("pleg pod inspection failed; retrying next relist", zap.String("pod", string(uid)), zap.Error(in.err))
		return nil
	}
	delete(p.reinspect, uid)
	prev := p.pods[uid]
	touchedAfter := prev != nil && prev.seq >= in.obs.seq
	changes := plan(prev, in.obs, p.tombstonedLocked)
	rec := p.recordLocked(in.obs)
	evs := p.commitLocked(rec, changes)
	if len(rec.entities) == 0 {
		p.forgetLocked(rec, touchedAfter)
		if p.pods[uid] == nil {
			return evs
		}
	}
	p.writeStatusLocked(rec, filterStatus(in.status, rec))
	p.verifyLocked(rec)
	if _, ok := p.lagging[uid]; ok && statusAgrees(rec) {
		delete(p.lagging, uid)
		evs = append(evs, Event{ID: uid, Type: PodSync})
	}
	return evs
}

// filterStatus keeps the statuses of ids the record has (drops stale ones).
func filterStatus(st *PodStatus, rec *podRecord) *PodStatus {
	out := *st
	out.SandboxStatuses = nil
	out.ContainerStatuses = nil
	for _, s := range st.SandboxStatuses {
		if _, ok := rec.entities[s.GetId()]; ok {
			out.SandboxStatuses = append(out.SandboxStatuses, s)
		}
	}
	for _, s := range st.ContainerStatuses {
		if _, ok := rec.entities[s.GetId()]; ok {
			out.ContainerStatuses = append(out.ContainerStatuses, s)
		}
	}
	if out.Name == "" {
		out.Name, out.Namespace = rec.name, rec.namespace
	}
	return &out
}

// relist lists every sandbox and container, diffs them against the
// records, inspects changed pods in parallel, writes the cache with the
// timestamp taken before listing, delivers events and, only when listing
// succeeded, advances the cache's global time.
func (p *PLEG) relist(ctx context.Context) error {
	p.relistMu.Lock()
	defer p.relistMu.Unlock()
	start := p.clock.Now()
	p.mu.Lock()
	seq := p.nextSeqLocked()
	p.mu.Unlock()

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	sbs, err := p.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return p.relistFailed(RelistFull, start, &RelistError{Method: "ListPodSandbox", Err: err})
	}
	cs, err := p.rt.ListContainers(ctx, nil)
	if err != nil {
		return p.relistFailed(RelistFull, start, &RelistError{Method: "ListContainers", Err: err})
	}
	snap := group(sbs, cs, seq)
	var listed map[string]struct{}
	if p.cfg.events { // only events are checked against it (staleLocked)
		listed = make(map[string]struct{}, len(sbs)+len(cs))
		for _, sb := range sbs {
			listed[sb.GetId()] = struct{}{}
		}
		for _, c := range cs {
			listed[c.GetId()] = struct{}{}
		}
	}

	p.mu.Lock()
	if listed != nil && start.After(p.listedAt) {
		p.listed, p.listedAt = listed, start
	}
	uids := map[types.UID]struct{}{}
	for uid := range snap {
		uids[uid] = struct{}{}
	}
	for uid := range p.pods {
		uids[uid] = struct{}{}
	}
	for uid := range p.reinspect {
		uids[uid] = struct{}{}
	}
	var toInspect []*podObservation
	var evs []Event
	for _, uid := range sortedUIDs(uids) {
		obs := snap[uid]
		if obs == nil {
			obs = newObservation(uid, seq, true)
		}
		rec := p.pods[uid]
		changes := plan(rec, obs, p.tombstonedLocked)
		_, again := p.reinspect[uid]
		switch {
		case len(obs.entities) == 0:
			// Vanished: nothing to inspect.
			delete(p.reinspect, uid)
			if rec == nil {
				continue
			}
			touchedAfter := rec.seq >= seq
			evs = append(evs, p.commitLocked(rec, changes)...)
			p.forgetLocked(rec, touchedAfter)
		case hasEvents(changes) || again:
			toInspect = append(toInspect, obs)
		case len(changes) > 0:
			p.commitLocked(p.recordLocked(obs), changes)
		}
	}
	p.publishLocked(evs)
	p.mu.Unlock()
	p.flush()

	results := p.inspectAll(ctx, toInspect, start)
	if parent.Err() != nil {
		// Stopping: failures are ours, not the runtime's; cache nothing.
		return parent.Err()
	}

	p.mu.Lock()
	n := len(evs)
	failed := 0
	for _, in := range results {
		if in.err != nil {
			failed++
		}
		e := p.commitInspectionLocked(in, start)
		n += len(e)
		p.publishLocked(e)
	}
	p.updateTimeLocked(start) // after the relist's own writes
	p.gcTombstonesLocked()
	// Healthy before the events go out: a watcher that got this relist's
	// events finds the PLEG healthy.
	p.markActiveLocked(start)
	p.relistErr = nil
	p.stats.Relists++
	p.mu.Unlock()
	p.flush()
	p.notify(RelistResult{Kind: RelistFull, Start: start, Duration: p.clock.Since(start), Inspected: len(results), Failed: failed, Events: n})
	return nil
}

func (p *PLEG) notify(r RelistResult) {
	p.notes.post(Observation{Kind: ObservedRelist, Relist: r})
	p.observe()
}

func (p *PLEG) relistFailed(kind RelistKind, start time.Time, err error) error {
	p.mu.Lock()
	p.relistErr = err
	switch kind {
	case RelistFull:
		p.stats.RelistFailures++
	case RelistProbe:
		p.stats.ProbeFailures++
	case RelistPods:
		p.stats.PodRelistFailures++
	}
	p.mu.Unlock()
	p.log.Warn("pleg relist failed", zap.String("kind", string(kind)), zap.Error(err))
	p.notify(RelistResult{Kind: kind, Start: start, Duration: p.clock.Since(start), Err: err})
	return err
}

func sortedUIDs(set map[types.UID]struct{}) []types.UID {
	out := make([]types.UID, 0, len(set))
	for uid := range set {
		out = append(out, uid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// relistPods relists a few pods: one ListPodSandbox, then per pod one
// ListContainers per sandbox and an inspection. Pods that fail are retried
// (reinspect set). It does not advance the cache's global time.
func (p *PLEG) relistPods(ctx context.Context, uids []types.UID) error {
	p.podRelistMu.Lock()
	defer p.podRelistMu.Unlock()
	start := p.clock.Now()
	p.mu.Lock()
	seq := p.nextSeqLocked()
	p.mu.Unlock()

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	sbs, err := p.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		p.mu.Lock()
		for _, uid := range uids {
			p.reinspect[uid] = struct{}{}
		}
		p.mu.Unlock()
		return p.relistFailed(RelistPods, start, &RelistError{Method: "ListPodSandbox", Err: err})
	}
	want := map[types.UID]*podObservation{}
	for _, uid := range uids {
		o := newObservation(uid, seq, true)
		o.sandboxedOnly = true
		want[uid] = o
	}
	for _, sb := range sbs {
		o := want[types.UID(sb.GetMetadata().GetUid())]
		if o == nil || sb.GetId() == "" {
			continue
		}
		o.name, o.namespace = sb.GetMetadata().GetName(), sb.GetMetadata().GetNamespace()
		o.entities[sb.GetId()] = observed{kind: kindSandbox, state: sandboxState(sb.GetState())}
	}
	results := make([]inspection, len(uids))
	var g errgroup.Group
	g.SetLimit(p.cfg.inspectLimit())
	for i, uid := range uids {
		o := want[uid]
		g.Go(func() error {
			var sandboxes []string
			for id, e := range o.entities {
				if e.kind == kindSandbox {
					sandboxes = append(sandboxes, id)
				}
			}
			sort.Strings(sandboxes)
			for _, sb := range sandboxes {
				cs, err := p.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb})
				if err != nil {
					results[i] = inspection{obs: o, err: &InspectError{UID: uid, Method: "ListContainers", ID: sb, Err: err}}
					return nil
				}
				for _, c := range cs {
					if c.GetId() != "" {
						o.entities[c.GetId()] = observed{kind: kindContainer, state: containerState(c.GetState()), sandboxID: sb}
					}
				}
			}
			if len(o.entities) == 0 {
				results[i] = inspection{obs: o, status: &PodStatus{ID: uid, Timestamp: start}}
				return nil
			}
			results[i] = p.inspect(ctx, o, start)
			return nil
		})
	}
	_ = g.Wait()
	if parent.Err() != nil {
		return parent.Err() // stopping: cache nothing
	}

	p.mu.Lock()
	failed := 0
	n := 0
	for _, in := range results {
		if in.err != nil {
			failed++
		}
		if in.err == nil && len(in.obs.entities) == 0 && len(in.obs.gone) == 0 {
			// Not in the runtime: if we knew it, it vanished.
			rec := p.pods[in.obs.uid]
			delete(p.reinspect, in.obs.uid)
			if rec == nil {
				continue
			}
			touchedAfter := rec.seq >= seq
			e := p.commitLocked(rec, plan(rec, in.obs, p.tombstonedLocked))
			p.forgetLocked(rec, touchedAfter)
			n += len(e)
			p.publishLocked(e)
			continue
		}
		e := p.commitInspectionLocked(in, start)
		n += len(e)
		p.publishLocked(e)
	}
	p.mu.Unlock()
	p.flush()

	p.mu.Lock()
	p.markActiveLocked(start)
	p.stats.PodRelists++
	p.mu.Unlock()
	p.notify(RelistResult{Kind: RelistPods, Start: start, Duration: p.clock.Since(start), Inspected: len(results), Failed: failed, Events: n})
	return nil
}

// probe is the evented mode's proof of life: one ListPodSandbox. It also
// checks the sandboxes against the records and asks for a reconcile relist
// when they disagree (an event was lost).
func (p *PLEG) probe(ctx context.Context) error {
	start := p.clock.Now()
	p.mu.Lock()
	seq := p.nextSeqLocked()
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	sbs, err := p.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return p.relistFailed(RelistProbe, start, &RelistError{Method: "ListPodSandbox", Err: err})
	}
	p.mu.Lock()
	p.markActiveLocked(start)
	p.relistErr = nil
	p.stats.Probes++
	listed := map[string]struct{}{}
	mismatch := ""
	for _, sb := range sbs {
		listed[sb.GetId()] = struct{}{}
		if sb.GetMetadata().GetUid() == "" || p.tombstonedLocked(sb.GetId()) {
			continue
		}
		rec := p.pods[types.UID(sb.GetMetadata().GetUid())]
		var e *entity
		if rec != nil {
			e = rec.entities[sb.GetId()]
		}
		cur, curSeq := stateNonExistent, uint64(0)
		if e != nil {
			cur, curSeq = e.state, e.seq
		}
		if applies(cur, curSeq, sandboxState(sb.GetState()), seq, false) {
			mismatch = sb.GetId()
		}
	}
	for _, rec := range p.pods {
		for id, e := range rec.entities {
			if _, ok := listed[id]; !ok && e.kind == kindSandbox && e.seq < seq {
				mismatch = id
			}
		}
	}
	if mismatch != "" {
		p.log.Info("pleg probe found a sandbox the events did not report; reconciling", zap.String("sandbox", mismatch))
		p.requestReconcileLocked()
	}
	p.mu.Unlock()
	p.notify(RelistResult{Kind: RelistProbe, Start: start, Duration: p.clock.Since(start)})
	return nil
}

// relistLoop runs the full relists (at once, then every relist period, or
// every safety-net period in evented mode, and at once on a reconcile
// request), the evented mode's probes and its retries of failed pods.
func (p *PLEG) relistLoop(ctx context.Context) {
	var lastFull, lastProbe, lastRetry time.Time
	var failedWant uint64 // reconcile request a failed relist already tried
	first := true
	for {
		if ctx.Err() != nil {
			return
		}
		now := p.clock.Now()
		p.mu.Lock()
		evented := p.mode == ModeEvented
		want, gen, up := p.reconWant, p.streamGen, p.streamUp
		reconcile := want != p.reconDone && want != failedWant
		var retry []types.UID
		if evented && len(p.reinspect) > 0 && now.Sub(lastRetry) >= p.cfg.period {
			for uid := range p.reinspect {
				retry = append(retry, uid)
			}
		}
		p.mu.Unlock()
		period := p.cfg.period
		if evented {
			period = p.cfg.safetyNet
		}
		switch {
		case first || reconcile || now.Sub(lastFull) >= period:
			first = false
			lastFull = now
			if p.relist(ctx) == nil {
				p.mu.Lock()
				if want > p.reconDone {
					p.reconDone = want
				}
				if up && p.streamUp && p.streamGen == gen {
					p.setModeLocked(ModeEvented, nil)
				}
				p.mu.Unlock()
				p.observe()
			} else {
				failedWant = want
			}
			lastProbe = p.clock.Now()
			continue
		case evented && now.Sub(lastProbe) >= p.cfg.probe:
			lastProbe = now
			_ = p.probe(ctx)
			continue
		case len(retry) > 0:
			lastRetry = now
			sort.Slice(retry, func(i, j int) bool { return retry[i] < retry[j] })
			_ = p.relistPods(ctx, retry)
			continue
		}
		wait := period - now.Sub(lastFull)
		if evented {
			wait = min(wait, p.cfg.probe-now.Sub(lastProbe))
			p.mu.Lock()
			if len(p.reinspect) > 0 {
				wait = min(wait, p.cfg.period-now.Sub(lastRetry))
			}
			p.mu.Unlock()
		}
		wait = max(wait, time.Millisecond)
		t := p.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-p.wakeRelist:
			t.Stop()
		}
	}
}

// podRelistLoop runs the coalesced on-demand pod relists.
func (p *PLEG) podRelistLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wakePods:
		}
		uids := p.takePending()
		if len(uids) > 0 {
			_ = p.relistPods(ctx, uids)
		}
	}
}

func (p *PLEG) takePending() []types.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	set := p.pending
	p.pending = map[types.UID]struct{}{}
	return sortedUIDs(set)
}
