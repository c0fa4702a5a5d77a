package agent

import (
	"container/heap"
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/concurrentstart/podplan"
	"github.com/syncpod/syncpod/criclient/podcri"
)

// probeKind is one of a container's three probes.
type probeKind uint8

const (
	startupKind probeKind = iota
	readinessKind
	livenessKind
	numProbeKinds
)

// String returns the kubelet's name of the probe ("Startup", ...).
func (k probeKind) String() string {
	return [...]string{"Startup", "Readiness", "Liveness"}[k]
}

func probeOf(c *corev1.Container, k probeKind) *corev1.Probe {
	switch k {
	case startupKind:
		return c.StartupProbe
	case readinessKind:
		return c.ReadinessProbe
	}
	return c.LivenessProbe
}

func hasProbes(c *corev1.Container) bool {
	return c.StartupProbe != nil || c.ReadinessProbe != nil || c.LivenessProbe != nil
}

// maxProbeTries is how often a probe that could not run is tried in a row.
const maxProbeTries = 3

// probeRunner runs one probe once (Agent.runProbe).
type probeRunner func(ctx context.Context, t handlerTarget, p *corev1.Probe) (probeResult, string, error)

// prober runs the probes of every running container of every pod on a
// bounded pool of goroutines: a heap of probes ordered by when they are
// next due on the agent's clock, one dispatcher that hands due probes out,
// and a fixed number of workers that run them. Nothing here runs in a pod
// worker's sync: a sync only tells the prober what it saw (sync), and
// reads verdicts (probeState, killReason) without waiting. A verdict that
// changes is reported through changed (the pod's status) and wake (the
// pod's worker must act: restart a container, start what a startup probe
// gated).
//
// Probes are keyed by container id, so a restarted container gets fresh
// probes; the kubelet's rules apply: startup first (liveness and
// readiness wait for it), readiness false until its first success,
// successThreshold and failureThreshold consecutive results to flip a
// verdict (liveness and startup succeed at 1), initialDelaySeconds
// counted from when the agent first saw the container running, and a
// probe that could not run (an exec the runtime failed) counts for
// nothing.
type prober struct {
	run     probeRunner
	clock   clock.WithTickerAndDelayedExecution
	log     *zap.Logger
	emit    func(Event)
	wake    func(types.UID)
	changed func(types.UID)
	active  *activity
	workers int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // capacity 1: the dispatcher has something to look at
	jobs   chan *probeWorker

	mu      sync.Mutex
	started bool
	closed  bool
	pods    map[types.UID]*probedPod
	byID    map[string]*probedContainer
	queue   probeQueue
}

// probedPod is what the prober keeps of one pod.
type probedPod struct {
	uid         types.UID
	key         string      // namespace/name
	pod         *corev1.Pod // the spec the last sync worked on
	containers  map[string]*probedContainer
	killed      map[string]killInfo // container id → why it is being killed (until the instance is gone)
	terminating bool                // deleted: liveness and startup probes stopped
}

// probedContainer is one running container instance and its verdicts.
type probedContainer struct {
	pp      *probedPod
	id      string
	spec    *corev1.Container
	attempt uint32
	since   time.Time // first seen running: initial delays count from here
	started bool      // the startup probe passed (true without one)
	ready   bool      // the readiness verdict (true without a probe, once started)
	kill    string    // set once liveness or startup failed for good
	probes  [numProbeKinds]*probeWorker
}

// probeWorker is one probe of one container instance: its schedule and
// its run of equal results.
type probeWorker struct {
	c       *probedContainer
	kind    probeKind
	probe   *corev1.Probe
	due     time.Time
	index   int  // in the heap; -1 when not scheduled
	running bool // handed to a worker
	stopped bool // removed, or held after a verdict that ends it
	last    probeResult
	run     int
}

func newProber(run probeRunner, clk clock.WithTickerAndDelayedExecution, log *zap.Logger, workers int, active *activity,
	emit func(Event), wake, changed func(types.UID)) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	return &prober{run: run, clock: clk, log: log, emit: emit, wake: wake, changed: changed, active: active,
		workers: workers, ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), jobs: make(chan *probeWorker),
		pods: map[types.UID]*probedPod{}, byID: map[string]*probedContainer{}}
}

// start starts the dispatcher and the workers.
func (p *prober) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	p.wg.Add(1 + p.workers)
	go p.dispatch()
	for range p.workers {
		go p.work()
	}
	p.poke()
}

// close stops every goroutine the prober started and waits for them.
func (p *prober) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	select {
	case <-p.kick: // never handled now
		p.active.add(-1)
	default:
	}
}

// poke wakes the dispatcher, counting the wake as work until it is handled.
func (p *prober) poke() {
	p.active.add(1)
	select {
	case p.kick <- struct{}{}:
	default:
		p.active.add(-1) // one is pending already
	}
}

func (p *prober) dispatch() {
	defer p.wg.Done()
	var timer clock.Timer
	var timerAt time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		}
		if !p.handOut() {
			p.active.add(-1)
			return
		}
		p.mu.Lock()
		var next time.Time
		if len(p.queue) > 0 {
			next = p.queue[0].due
		}
		p.mu.Unlock()
		// A probe pushed since handOut looked has poked: the pending kick
		// hands it out, so a due time already past needs no timer.
		if d := next.Sub(p.clock.Now()); !next.IsZero() && d > 0 && (timer == nil || !next.Equal(timerAt)) {
			if timer != nil {
				timer.Stop()
			}
			// The callback runs under a fake clock's lock: it only pokes.
			timer, timerAt = p.clock.AfterFunc(d, p.poke), next
		}
		p.active.add(-1) // after the timer for the next turn is armed
	}
}

// handOut gives every due probe to a worker; false when the prober stops.
func (p *prober) handOut() bool {
	for {
		now := p.clock.Now()
		p.mu.Lock()
		if len(p.queue) == 0 || p.queue[0].due.After(now) {
			p.mu.Unlock()
			return true
		}
		w := heap.Pop(&p.queue).(*probeWorker)
		w.running = true
		p.active.add(1) // given back by the worker once the result is applied
		p.mu.Unlock()
		select {
		case p.jobs <- w:
		case <-p.ctx.Done():
			p.active.add(-1)
			return false
		}
	}
}

func (p *prober) work() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case w := <-p.jobs:
			p.probe(w)
			p.active.add(-1)
		}
	}
}

// notice is what applying a result asks for, done outside the lock.
type notice struct {
	events  []Event
	changed bool
	wake    bool
	kick    bool
}

func (p *prober) probe(w *probeWorker) {
	p.mu.Lock()
	if w.stopped || p.closed {
		w.running = false
		p.mu.Unlock()
		return
	}
	c := w.c
	t := handlerTarget{pod: c.pp.pod, container: c.spec, id: c.id}
	probe := w.probe
	p.mu.Unlock()

	// A probe that could not run is tried again at once, up to three
	// times, as the kubelet does.
	var res probeResult
	var out string
	var err error
	for range maxProbeTries {
		res, out, err = p.run(p.ctx, t, probe)
		if err == nil || p.ctx.Err() != nil {
			break
		}
	}

	p.mu.Lock()
	w.running = false
	if w.stopped || p.closed || p.ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	if err != nil {
		p.log.Debug("probe errored", zap.String("pod", c.pp.key), zap.String("container", c.spec.Name),
			zap.Stringer("probe", w.kind), zap.Error(err))
	}
	n := p.applyLocked(w, res, out, err, p.clock.Now())
	uid := c.pp.uid
	p.mu.Unlock()
	p.notify(uid, n)
}

func (p *prober) notify(uid types.UID, n notice) {
	for _, e := range n.events {
		p.emit(e)
	}
	if n.changed {
		p.changed(uid)
	}
	if n.wake {
		p.wake(uid)
	}
	if n.kick {
		p.poke()
	}
}

func thresholds(k probeKind, pr *corev1.Probe) (success, failure int) {
	success, failure = int(pr.SuccessThreshold), int(pr.FailureThreshold)
	if success <= 0 || k != readinessKind {
		success = 1 // liveness and startup must be 1
	}
	if failure <= 0 {
		failure = 3
	}
	return success, failure
}

func probePeriod(pr *corev1.Probe) time.Duration {
	if pr.PeriodSeconds > 0 {
		return time.Duration(pr.PeriodSeconds) * time.Second
	}
	return 10 * time.Second
}

// restartMessage is the kubelet's message for a container killed by a
// probe or hook failure.
func restartMessage(pod *corev1.Pod, c *corev1.Container, what string) string {
	msg := fmt.Sprintf("Container %s %s", c.Name, what)
	if podcri.IsSidecar(c) || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		msg += ", will be restarted"
	}
	return msg
}

// applyLocked folds one result into w's run and the container's verdicts.
func (p *prober) applyLocked(w *probeWorker, res probeResult, out string, err error, now time.Time) notice {
	var n notice
	c := w.c
	ev := Event{Pod: c.pp.key, Container: c.spec.Name, Attempt: c.attempt}
	switch {
	case res == resultUnknown:
		ev.Type, ev.Err = eventUnhealthy, &probeError{Probe: w.kind.String(), Container: c.spec.Name, Err: err}
		n.events = append(n.events, ev)
	case res == resultFailure:
		ev.Type, ev.Err = eventUnhealthy, &probeError{Probe: w.kind.String(), Container: c.spec.Name, Output: out}
		n.events = append(n.events, ev)
	}
	if res != resultUnknown {
		if res == w.last {
			w.run++
		} else {
			w.last, w.run = res, 1
		}
		success, failure := thresholds(w.kind, w.probe)
		if (res == resultSuccess && w.run >= success) || (res == resultFailure && w.run >= failure) {
			n = p.verdictLocked(w, res, now, n)
		}
	}
	if !w.stopped && w.index < 0 {
		w.due = w.due.Add(probePeriod(w.probe))
		if !w.due.After(now) {
			w.due = now.Add(probePeriod(w.probe))
		}
		heap.Push(&p.queue, w)
		n.kick = true
	}
	return n
}

// verdictLocked acts on a result that reached its threshold.
func (p *prober) verdictLocked(w *probeWorker, res probeResult, now time.Time, n notice) notice {
	c := w.c
	switch w.kind {
	case startupKind:
		if res == resultSuccess {
			c.started = true
			p.stopLocked(w)
			// Liveness and readiness start now (or at their initial delay).
			for _, k := range []probeKind{readinessKind, livenessKind} {
				if lw := c.probes[k]; lw != nil && !lw.stopped && lw.index < 0 && !lw.running {
					lw.due = laterOf(now, c.since.Add(time.Duration(lw.probe.InitialDelaySeconds)*time.Second))
					heap.Push(&p.queue, lw)
					n.kick = true
				}
			}
			if c.probes[readinessKind] == nil {
				c.ready = true
			}
			n.changed, n.wake = true, true
			return n
		}
		p.killLocked(c, restartMessage(c.pp.pod, c.spec, "failed startup probe"), w.probe.TerminationGracePeriodSeconds)
		n.wake = true
	case livenessKind:
		if res == resultFailure {
			p.killLocked(c, restartMessage(c.pp.pod, c.spec, "failed liveness probe"), w.probe.TerminationGracePeriodSeconds)
			n.wake = true
		}
	case readinessKind:
		if ready := res == resultSuccess; ready != c.ready {
			c.ready = ready
			n.changed = true
			// A start-after edge may wait for this container's readiness.
			n.wake = c.pp.pod.Annotations[podplan.AnnotationStartAfter] != ""
		}
	}
	return n
}

// killInfo is why the agent kills a container, and the grace period the
// failing probe sets (its terminationGracePeriodSeconds; nil: the pod's).
type killInfo struct {
	reason  string
	grace   *int64
	done    bool   // the container was stopped
	name    string // the container's name and attempt: a newer attempt ends the record
	attempt uint32
}

// killLocked records that c must be killed and restarted, and holds its
// liveness and startup probes until a new instance runs (readiness goes
// on, as the kubelet's does).
func (p *prober) killLocked(c *probedContainer, reason string, grace *int64) {
	c.kill = reason
	c.pp.killed[c.id] = killInfo{reason: reason, grace: grace, name: c.spec.Name, attempt: c.attempt}
	p.stopLocked(c.probes[startupKind])
	p.stopLocked(c.probes[livenessKind])
}

func (p *prober) stopLocked(w *probeWorker) {
	if w == nil {
		return
	}
	w.stopped = true
	if w.index >= 0 {
		heap.Remove(&p.queue, w.index)
	}
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (p *prober) podLocked(pod *corev1.Pod) *probedPod {
	pp := p.pods[pod.UID]
	if pp == nil {
		pp = &probedPod{uid: pod.UID, containers: map[string]*probedContainer{}, killed: map[string]killInfo{}}
		p.pods[pod.UID] = pp
	}
	pp.pod, pp.key = pod, podKey(pod)
	return pp
}

// sync brings the pod's probes in line with st, the status a sync works
// on: probes for every running container instance that has any, none for
// the instances that stopped or went. It never waits for a probe.
func (p *prober) sync(pod *corev1.Pod, st *runtimePodStatus) {
	specs := map[string]*corev1.Container{}
	probed := false
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			specs[list[i].Name] = &list[i]
			probed = probed || hasProbes(&list[i])
		}
	}
	now := p.clock.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	pp := p.pods[pod.UID]
	if pp == nil && !probed {
		p.mu.Unlock()
		return
	}
	pp = p.podLocked(pod)
	pp.terminating = false // a sync runs only for a pod that is wanted
	seen := map[string]bool{}
	kick := false
	for _, cs := range st.Containers {
		if cs.ID == "" || cs.Assumed {
			continue
		}
		seen[cs.ID] = true
		old := pp.containers[cs.ID]
		spec := specs[cs.Name]
		if cs.State != stateRunning || spec == nil || !hasProbes(spec) || pp.terminating {
			if old != nil && (cs.State != stateRunning || spec == nil || !hasProbes(spec)) {
				p.dropLocked(old)
			}
			continue
		}
		if old == nil {
			p.addLocked(pp, cs, spec, now)
			kick = true
			continue
		}
		if p.respecLocked(old, spec, now) {
			kick = true
		}
	}
	for id, c := range pp.containers {
		if !seen[id] {
			p.dropLocked(c)
		}
	}
	for id, k := range pp.killed {
		// Kept while the instance may still show: until a newer attempt
		// of the container does.
		if l := st.Latest(k.name); !seen[id] && l != nil && l.Attempt > k.attempt {
			delete(pp.killed, id)
		}
	}
	p.mu.Unlock()
	if kick {
		p.poke()
	}
}

func (p *prober) addLocked(pp *probedPod, cs *containerInstance, spec *corev1.Container, now time.Time) {
	id := cs.ID
	c := &probedContainer{pp: pp, id: id, attempt: cs.Attempt, spec: spec.DeepCopy(), since: now, started: spec.StartupProbe == nil}
	c.ready = c.started && spec.ReadinessProbe == nil
	if k, killed := pp.killed[id]; killed {
		// A kill decided earlier (a failed postStart hook) still holds.
		c.kill = k.reason
	}
	for k := range numProbeKinds {
		pr := probeOf(c.spec, k)
		if pr == nil {
			continue
		}
		w := &probeWorker{c: c, kind: k, probe: pr, index: -1}
		c.probes[k] = w
		if c.kill != "" && k != readinessKind {
			w.stopped = true
			continue
		}
		if k == startupKind || c.started {
			w.due = now.Add(time.Duration(pr.InitialDelaySeconds) * time.Second)
			heap.Push(&p.queue, w)
		}
	}
	pp.containers[id] = c
	p.byID[id] = c
}

// respecLocked takes a changed probe spec of a running container (the pod
// was updated without a change that restarts it): a changed probe starts
// over.
func (p *prober) respecLocked(c *probedContainer, spec *corev1.Container, now time.Time) bool {
	kick := false
	for k := range numProbeKinds {
		pr := probeOf(spec, k)
		w := c.probes[k]
		if w != nil && reflect.DeepEqual(w.probe, pr) {
			continue
		}
		if w == nil && pr == nil {
			continue
		}
		p.stopLocked(w)
		c.probes[k] = nil
		if pr == nil {
			continue
		}
		pr = pr.DeepCopy()
		nw := &probeWorker{c: c, kind: k, probe: pr, index: -1}
		c.probes[k] = nw
		if (k == startupKind && !c.started) || (k != startupKind && c.started) {
			if c.kill != "" && k != readinessKind {
				nw.stopped = true
				continue
			}
			nw.due = now
			heap.Push(&p.queue, nw)
			kick = true
		}
	}
	c.spec = spec.DeepCopy()
	return kick
}

func (p *prober) dropLocked(c *probedContainer) {
	for _, w := range c.probes {
		p.stopLocked(w)
	}
	delete(c.pp.containers, c.id)
	delete(p.byID, c.id)
}

// podTerminating stops the liveness and startup probes of a deleted pod,
// as the kubelet does: a pod being stopped is not restarted.
func (p *prober) podTerminating(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.pods[uid]
	if pp == nil {
		return
	}
	pp.terminating = true
	for _, c := range pp.containers {
		p.stopLocked(c.probes[startupKind])
		p.stopLocked(c.probes[livenessKind])
	}
}

// forget drops everything kept of pod uid.
func (p *prober) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.pods[uid]
	if pp == nil {
		return
	}
	for _, c := range pp.containers {
		p.dropLocked(c)
	}
	delete(p.pods, uid)
}

// markKilled records that container id of pod is being killed for reason
// (a failed postStart hook), so that the restart decision treats its exit
// as a failure.
func (p *prober) markKilled(pod *corev1.Pod, cs *containerInstance, reason string) {
	id := cs.ID
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	pp := p.podLocked(pod)
	if _, ok := pp.killed[id]; ok {
		return // decided by a probe: keep its grace period
	}
	pp.killed[id] = killInfo{reason: reason, name: cs.Name, attempt: cs.Attempt}
	if c := pp.containers[id]; c != nil && c.kill == "" {
		p.killLocked(c, reason, nil)
	}
}

// state is probeState's answer: the verdicts for container id, or, for an
// instance the prober has not seen running yet, what its spec implies.
func (p *prober) state(uid types.UID, name, id string) (started, ready bool) {
	if p == nil {
		return true, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.byID[id]; c != nil && id != "" {
		return c.started, c.started && c.ready
	}
	pp := p.pods[uid]
	if pp == nil {
		return true, true
	}
	for _, list := range [][]corev1.Container{pp.pod.Spec.InitContainers, pp.pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				started = list[i].StartupProbe == nil
				return started, started && list[i].ReadinessProbe == nil
			}
		}
	}
	return true, true
}

// killReason says why container id of pod uid must be (or was) killed by
// the agent ("" if it need not), and the grace period to kill it with
// (nil: the pod's).
func (p *prober) killReason(uid types.UID, id string) (string, *int64, bool) {
	if id == "" || p == nil {
		return "", nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp := p.pods[uid]; pp != nil {
		k := pp.killed[id]
		return k.reason, k.grace, k.done
	}
	return "", nil, false
}

// killed records that the kill of container id of pod uid was done (its
// StopContainer returned), so that a status that has not caught up does
// not make a sync kill it again.
func (p *prober) killed(uid types.UID, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp := p.pods[uid]; pp != nil {
		if k, ok := pp.killed[id]; ok {
			k.done = true
			pp.killed[id] = k
		}
	}
}

// probeQueue is a heap of probe workers by due time.
type probeQueue []*probeWorker

func (q probeQueue) Len() int           { return len(q) }
func (q probeQueue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q probeQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

func (q *probeQueue) Push(x any) {
	w := x.(*probeWorker)
	w.index = len(*q)
	*q = append(*q, w)
}

func (q *probeQueue) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	w.index = -1
	return w
}
