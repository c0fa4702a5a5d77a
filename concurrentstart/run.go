package concurrentstart

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// nodeState is where a node is in one run, as seen by the scheduling loop.
type nodeState uint8

const (
	waiting  nodeState = iota // some edge not yet met
	queued                    // every edge met, waiting for a start slot
	launched                  // its goroutine is running
	finished                  // its Result is final
)

// event is sent by a node's goroutine to the scheduling loop.
type event struct {
	node int
	// reached is the condition the node has now reached (may skip several).
	reached Condition
	// first is set on the node's first event: Start has returned.
	first bool
	// final is set on the node's last event; the node's goroutine has then
	// written its Result into run.results, which the loop may now read.
	final    bool
	failedAt Condition
}

// failFastCause is the cause of the run context's cancellation under
// FailFast; node functions can see it through context.Cause.
type failFastCause struct {
	node string
	err  error
}

func (c *failFastCause) Error() string {
	return fmt.Sprintf("concurrentstart: fail-fast: node %q failed: %v", c.node, c.err)
}

func (c *failFastCause) Unwrap() error { return context.Canceled }

type stopKind uint8

const (
	running stopKind = iota
	stoppedCanceled
	stoppedFailFast
)

// run is the state of one Plan.Run call. Everything but the event channel
// and the wait group is owned by the scheduling loop (the goroutine calling
// Run), except that a launched node's goroutine owns results[i] until it
// sends its final event.
type run struct {
	p       *Plan
	ctx     context.Context // the caller's
	nodeCtx context.Context // passed to node functions
	cancel  context.CancelCauseFunc

	results  []Result
	state    []nodeState
	unmet    []int32
	reached  []Condition
	queue    []int32
	head     int
	inFlight int // Start functions running
	live     int // node goroutines that have not sent their final event
	stop     stopKind
	events   chan event
	wg       sync.WaitGroup
	aborted  atomic.Bool // Run is unwinding: call no observer
}

// Run runs the plan: it calls each node's Start once every edge of the node
// is met, at most WithMaxParallel Start functions at a time, first come,
// first served; then its Ready and Complete functions, if any, in the
// node's own goroutine. It returns once every node has an outcome and every
// goroutine it started has returned; no function or observer is called
// after Run returns.
//
// When ctx is done, Run starts nothing more: nodes not yet started are
// Canceled at once, in-flight functions see their context canceled, and Run
// returns as soon as they return.
//
// The error is nil if every node Succeeded, otherwise a *RunError. A nil
// ctx or a nil *Plan returns an empty Report and an *ArgError without
// calling anything.
//
// Run does not recover a panic in a node function or the observer. As with
// errgroup, a panic is the caller's bug: recovering it would turn its stack
// into a mere value, and carrying it back to Run would delay it behind the
// other nodes or hide it behind one that never returns. So a panic in a
// node's goroutine crashes the program with its own stack, and one in the
// goroutine calling Run (an observer told of a node that never started)
// unwinds through Run unchanged, after canceling the context of the
// functions in flight, which are left to return on their own.
func (p *Plan) Run(ctx context.Context) (Report, error) {
	if p == nil {
		return Report{}, &ArgError{Method: "Run", Arg: "Plan", Reason: "is nil; use New"}
	}
	if ctx == nil {
		return Report{}, &ArgError{Method: "Run", Arg: "ctx", Reason: "must not be nil"}
	}
	n := len(p.nodes)
	r := &run{
		p:       p,
		ctx:     ctx,
		results: make([]Result, n),
		state:   make([]nodeState, n),
		unmet:   make([]int32, n),
		reached: make([]Condition, n),
		queue:   make([]int32, 0, n),
		// A node sends at most three events (Started and Ready before the
		// waits that follow them, then its final one), so no send blocks
		// and node goroutines end even if the loop is gone.
		events: make(chan event, 3*n),
	}
	r.nodeCtx, r.cancel = context.WithCancelCause(ctx)
	defer r.cancel(nil)
	copy(r.unmet, p.unmet)
	for i := range r.unmet {
		if r.unmet[i] == 0 {
			r.enqueue(i)
		}
	}
	normal := false
	defer func() {
		if !normal { // an observer panicked (or called Goexit) in the loop
			r.aborted.Store(true)
			r.cancel(errAborted)
		}
	}()
	r.loop()
	normal = true
	r.wg.Wait()
	return r.report()
}

// errAborted is the cause the run context is canceled with when Run unwinds
// because of a panic in the goroutine calling it.
var errAborted = errors.New("concurrentstart: run aborted by a panic")

// notify tells the observer, if any, of ev, unless the run is unwinding.
func (r *run) notify(ev Event) {
	if fn := r.p.cfg.observer; fn != nil && !r.aborted.Load() {
		fn(ev)
	}
}

func (r *run) loop() {
	done := r.ctx.Done()
	for {
		r.launchQueued()
		if r.live == 0 {
			break
		}
		select {
		case ev := <-r.events:
			r.handle(ev)
		case <-done:
			done = nil
			r.stopCanceled()
		}
	}
	// Nothing is in flight. Nodes can still be unfinished only if the run
	// was canceled while the last goroutines were finishing.
	if r.stop == running && r.ctx.Err() != nil {
		r.stopCanceled()
	}
	for i := range r.state {
		if r.state[i] != finished { // unreachable for a validated plan
			r.finishUnstarted(i, Skipped, nil, "dependencies never met", "")
		}
	}
}

func (r *run) enqueue(i int) {
	r.state[i] = queued
	r.queue = append(r.queue, int32(i))
}

func (r *run) launchQueued() {
	for r.stop == running && r.head < len(r.queue) && r.inFlight < r.p.cfg.maxParallel {
		if r.ctx.Err() != nil {
			r.stopCanceled()
			return
		}
		i := int(r.queue[r.head])
		r.head++
		r.state[i] = launched
		r.inFlight++
		r.live++
		r.wg.Add(1)
		go r.exec(i)
	}
}

func (r *run) handle(ev event) {
	i := ev.node
	if ev.first {
		r.inFlight--
	}
	for c := r.reached[i] + 1; c <= ev.reached; c++ {
		for _, j := range r.p.dependents[i][c-1] {
			if r.unmet[j]--; r.unmet[j] == 0 && r.state[j] == waiting && r.stop == running {
				r.enqueue(int(j))
			}
		}
	}
	r.reached[i] = max(r.reached[i], ev.reached)
	if !ev.final {
		return
	}
	r.live--
	r.state[i] = finished
	if res := &r.results[i]; res.Outcome == Failed {
		r.onFailure(i, ev.failedAt, res.Err)
	}
}

func (r *run) onFailure(i int, failedAt Condition, err error) {
	name := r.p.nodes[i].Name
	if r.p.cfg.policy == FailFast {
		if r.stop != running {
			return
		}
		r.stop = stoppedFailFast
		r.cancel(&failFastCause{node: name, err: err})
		reason := fmt.Sprintf("fail-fast: node %q failed", name)
		for j := range r.state {
			if s := r.state[j]; s == waiting || s == queued {
				r.finishUnstarted(j, Skipped, nil, reason, name)
			}
		}
		return
	}
	// ContinueIndependent: skip every node whose unmet edges lead to i.
	type step struct{ node, via int }
	var stack []step
	for c := failedAt; c <= Completed; c++ {
		for _, j := range r.p.dependents[i][c-1] {
			stack = append(stack, step{int(j), i})
		}
	}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if r.state[s.node] != waiting {
			continue
		}
		reason := fmt.Sprintf("dependency %q failed", name)
		if s.via != i {
			reason = fmt.Sprintf("dependency %q was skipped because %q failed", r.p.nodes[s.via].Name, name)
		}
		r.finishUnstarted(s.node, Skipped, nil, reason, name)
		for c := range r.p.dependents[s.node] {
			for _, k := range r.p.dependents[s.node][c] {
				stack = append(stack, step{int(k), s.node})
			}
		}
	}
}

func (r *run) stopCanceled() {
	if r.stop != running {
		return
	}
	r.stop = stoppedCanceled
	cause := context.Cause(r.ctx)
	for j := range r.state {
		if s := r.state[j]; s == waiting || s == queued {
			r.finishUnstarted(j, Canceled, cause, "run canceled before start", "")
		}
	}
}

// finishUnstarted records the outcome of a node that never started. It is
// called from the scheduling loop.
func (r *run) finishUnstarted(i int, o Outcome, err error, reason, cause string) {
	r.state[i] = finished
	r.results[i] = Result{
		Name:    r.p.nodes[i].Name,
		Outcome: o,
		Err:     err,
		Reason:  reason,
		Cause:   cause,
		EndTime: r.p.cfg.clock.Now(),
	}
	r.notify(Event{Kind: NodeFinished, Node: r.results[i].Name, Time: r.results[i].EndTime, Result: r.results[i]})
}

// exec runs node i's functions in order, reporting each condition reached.
func (r *run) exec(i int) {
	defer r.wg.Done()
	n := &r.p.nodes[i]
	res := Result{Name: n.Name, StartTime: r.p.cfg.clock.Now()}
	r.notify(Event{Kind: NodeStarted, Node: n.Name, Time: res.StartTime})
	first := true
	phases := [3]Func{n.Start, n.Ready, n.Complete}
	for c := Started; c <= Completed; c++ {
		fn := phases[c-1]
		if fn == nil {
			res.Reached = c
			continue
		}
		if c > Started {
			if res.Reached > 0 { // report what was reached before waiting
				r.events <- event{node: i, reached: res.Reached, first: first}
				first = false
			}
			if err := r.nodeCtx.Err(); err != nil {
				r.finish(i, &res, first, c, context.Cause(r.nodeCtx))
				return
			}
		}
		if err := fn(r.nodeCtx); err != nil {
			r.finish(i, &res, first, c, err)
			return
		}
		res.Reached = c
	}
	r.finish(i, &res, first, 0, nil)
}

// finish completes a launched node's Result and sends its final event.
func (r *run) finish(i int, res *Result, first bool, failedAt Condition, err error) {
	res.EndTime = r.p.cfg.clock.Now()
	switch {
	case err == nil:
		res.Outcome = Succeeded
	case r.nodeCtx.Err() != nil:
		res.Outcome = Canceled
		res.Err = err
		res.Reason = "run canceled"
		if ff, ok := context.Cause(r.nodeCtx).(*failFastCause); ok {
			res.Reason = fmt.Sprintf("fail-fast: node %q failed", ff.node)
			res.Cause = ff.node
		}
	default:
		res.Outcome = Failed
		res.Err = err
	}
	r.notify(Event{Kind: NodeFinished, Node: res.Name, Time: res.EndTime, Result: *res})
	r.results[i] = *res
	r.events <- event{node: i, reached: res.Reached, first: first, final: true, failedAt: failedAt}
}

func (r *run) report() (Report, error) {
	rep := Report{Results: r.results, index: r.p.index}
	var re RunError
	for i := range r.results {
		res := &r.results[i]
		switch res.Outcome {
		case Failed:
			re.Failed = append(re.Failed, res.Name)
		case Skipped:
			re.Skipped = append(re.Skipped, res.Name)
		case Canceled:
			re.Canceled = append(re.Canceled, res.Name)
		}
	}
	if len(re.Failed)+len(re.Skipped)+len(re.Canceled) == 0 {
		return rep, nil
	}
	for i := range r.results {
		res := &r.results[i]
		if (res.Outcome == Failed || res.Outcome == Canceled) && !res.StartTime.IsZero() {
			re.errs = append(re.errs, &NodeError{Node: res.Name, Outcome: res.Outcome, Phase: r.failedPhase(i), Err: res.Err})
		}
	}
	if err := context.Cause(r.ctx); err != nil {
		re.errs = append(re.errs, err)
	}
	return rep, &re
}

func (r *run) failedPhase(i int) Condition {
	if c := r.results[i].Reached + 1; c <= Completed {
		return c
	}
	return Completed
}
