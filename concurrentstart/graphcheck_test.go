package concurrentstart_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	cs "github.com/syncpod/syncpod/concurrentstart"
)

// genNode describes one node of a generated graph.
type genNode struct {
	name        string
	nilStart    bool
	hasReady    bool
	hasComplete bool
	// failAt is the phase whose function returns an error (0: none). It is
	// only ever set to a phase the node has a function for.
	failAt cs.Condition
	deps   []genDep
}

type genDep struct {
	to   int // index into nodes; len(nodes) means an unknown name
	cond cs.Condition
}

// genGraph is a graph description from which the property test and the
// fuzz target build a plan and an oracle.
type genGraph struct {
	nodes       []genNode
	maxParallel int // 0: unbounded
	policy      cs.FailurePolicy
	cancelAfter int // cancel the run when this many Starts have begun (0: never)
	yield       bool
}

// randomDAG returns a valid graph: every edge points to a lower index, and
// names are shuffled so plan order is not topological order.
func randomDAG(rng *rand.Rand) genGraph {
	n := 1 + rng.IntN(40)
	g := genGraph{nodes: make([]genNode, n), yield: rng.IntN(2) == 0}
	if rng.IntN(4) > 0 {
		g.maxParallel = 1 + rng.IntN(6)
	}
	if rng.IntN(2) == 0 {
		g.policy = cs.FailFast
	}
	if rng.IntN(5) == 0 {
		g.cancelAfter = 1 + rng.IntN(n)
	}
	failRate := []int{0, 5, 20}[rng.IntN(3)]
	perm := rng.Perm(n)
	for i := range g.nodes {
		nd := genNode{name: fmt.Sprintf("n%02d", perm[i]), hasReady: rng.IntN(3) == 0, hasComplete: rng.IntN(3) == 0}
		if rng.IntN(100) < failRate {
			phases := []cs.Condition{cs.Started}
			if nd.hasReady {
				phases = append(phases, cs.Ready)
			}
			if nd.hasComplete {
				phases = append(phases, cs.Completed)
			}
			nd.failAt = phases[rng.IntN(len(phases))]
		}
		if i > 0 {
			for range rng.IntN(min(i, 4) + 1) {
				nd.deps = append(nd.deps, genDep{to: rng.IntN(i), cond: cs.Condition(1 + rng.IntN(3))})
			}
		}
		g.nodes[i] = nd
	}
	// Plan order must not be topological order: reverse it.
	slices.Reverse(g.nodes)
	for i := range g.nodes {
		for k := range g.nodes[i].deps {
			g.nodes[i].deps[k].to = n - 1 - g.nodes[i].deps[k].to
		}
	}
	return g
}

// decodeGraph turns fuzz input into a graph that may be invalid in any way.
func decodeGraph(data []byte) genGraph {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	n := next() % 24
	g := genGraph{nodes: make([]genNode, n)}
	flags := next()
	if flags&1 != 0 {
		g.policy = cs.FailFast
	}
	g.yield = flags&2 != 0
	g.maxParallel = next() % 8
	if c := next(); c%4 == 0 {
		g.cancelAfter = 1 + c/4%max(n, 1)
	}
	for i := range g.nodes {
		f := next()
		nd := genNode{name: fmt.Sprintf("n%d", i), hasReady: f&1 != 0, hasComplete: f&2 != 0}
		switch f >> 5 {
		case 1:
			nd.failAt = cs.Started
		case 2:
			if nd.hasReady {
				nd.failAt = cs.Ready
			}
		case 3:
			if nd.hasComplete {
				nd.failAt = cs.Completed
			}
		}
		switch next() % 32 {
		case 0:
			nd.name = ""
		case 1:
			nd.nilStart = true
		case 2:
			if i > 0 {
				nd.name = fmt.Sprintf("n%d", i-1) // duplicate
			}
		}
		for range next() % 4 {
			nd.deps = append(nd.deps, genDep{to: next() % (n + 1), cond: cs.Condition(next() % 4)})
		}
		g.nodes[i] = nd
	}
	return g
}

// recorder captures, per node, the logical time (a global sequence number)
// at which each function was entered and returned successfully.
type recorder struct {
	seq        atomic.Int64
	enter      []int64
	done       [][4]int64 // done[i][c]: seq when the function for c returned nil
	inFlight   atomic.Int64
	maxFlight  atomic.Int64
	starts     atomic.Int64
	cancel     context.CancelFunc
	startHooks atomic.Int64
	mu         sync.Mutex
	finished   map[string]int
}

func (g genGraph) build(rec *recorder) []cs.Node {
	n := len(g.nodes)
	rec.enter = make([]int64, n)
	rec.done = make([][4]int64, n)
	rec.finished = map[string]int{}
	nodes := make([]cs.Node, n)
	for i, nd := range g.nodes {
		phase := func(c cs.Condition) cs.Func {
			return func(ctx context.Context) error {
				if c == cs.Started {
					rec.enter[i] = rec.seq.Add(1)
					if k := rec.starts.Add(1); g.cancelAfter > 0 && int(k) == g.cancelAfter {
						rec.cancel()
					}
					f := rec.inFlight.Add(1)
					for m := rec.maxFlight.Load(); f > m && !rec.maxFlight.CompareAndSwap(m, f); m = rec.maxFlight.Load() {
					}
					defer rec.inFlight.Add(-1)
				}
				if g.yield {
					runtime.Gosched()
				}
				if nd.failAt == c {
					return fmt.Errorf("%s: injected %s failure", nd.name, c)
				}
				rec.done[i][c] = rec.seq.Add(1)
				return nil
			}
		}
		nodes[i] = cs.Node{Name: nd.name}
		if !nd.nilStart {
			nodes[i].Start = phase(cs.Started)
		}
		if nd.hasReady {
			nodes[i].Ready = phase(cs.Ready)
		}
		if nd.hasComplete {
			nodes[i].Complete = phase(cs.Completed)
		}
		for _, d := range nd.deps {
			name := "unknown-node"
			if d.to < n {
				name = g.nodes[d.to].name
			}
			nodes[i].DependsOn = append(nodes[i].DependsOn, cs.Dependency{Node: name, Condition: d.cond})
		}
	}
	return nodes
}

// validity is the oracle's view of a graph: which error kinds it must get.
type validity struct {
	structural bool // empty name, nil start, duplicate, unknown dep, bad condition
	cycle      bool
}

func (g genGraph) validity() validity {
	var v validity
	seen := map[string]bool{}
	for _, nd := range g.nodes {
		if nd.name == "" || nd.nilStart || seen[nd.name] {
			v.structural = true
		}
		seen[nd.name] = true
		for _, d := range nd.deps {
			if d.to >= len(g.nodes) || d.cond < cs.Started || d.cond > cs.Completed {
				v.structural = true
			}
		}
	}
	if v.structural {
		return v
	}
	// DFS cycle check on indices.
	color := make([]int, len(g.nodes))
	var visit func(int) bool
	visit = func(i int) bool {
		color[i] = 1
		for _, d := range g.nodes[i].deps {
			if color[d.to] == 1 || (color[d.to] == 0 && visit(d.to)) {
				return true
			}
		}
		color[i] = 2
		return false
	}
	for i := range g.nodes {
		if color[i] == 0 && visit(i) {
			v.cycle = true
			break
		}
	}
	return v
}

// checkGraph builds and runs g and checks every invariant of the executor.
func checkGraph(t *testing.T, g genGraph) {
	t.Helper()
	rec := &recorder{}
	nodes := g.build(rec)
	opts := []cs.Option{
		cs.WithFailurePolicy(g.policy),
		cs.WithObserver(func(ev cs.Event) {
			if ev.Kind == cs.NodeStarted {
				rec.startHooks.Add(1)
				return
			}
			rec.mu.Lock()
			rec.finished[ev.Node]++
			rec.mu.Unlock()
		}),
	}
	if g.maxParallel > 0 {
		opts = append(opts, cs.WithMaxParallel(g.maxParallel))
	}
	plan, err := cs.New(nodes, opts...)
	want := g.validity()
	switch {
	case want.structural:
		if err == nil || !errors.Is(err, cs.ErrInvalidPlan) {
			t.Fatalf("New = %v, want a structural ErrInvalidPlan error", err)
		}
		var ce *cs.CycleError
		if errors.As(err, &ce) {
			t.Fatalf("New reported a cycle %v before structural errors", ce)
		}
		return
	case want.cycle:
		var ce *cs.CycleError
		if !errors.As(err, &ce) || !errors.Is(err, cs.ErrInvalidPlan) {
			t.Fatalf("New = %v, want *CycleError", err)
		}
		checkCyclePath(t, nodes, ce.Path)
		return
	case err != nil:
		t.Fatalf("New on a valid graph: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec.cancel = cancel
	rep, runErr := plan.Run(ctx)

	n := len(g.nodes)
	if len(rep.Results) != n {
		t.Fatalf("got %d results, want %d", len(rep.Results), n)
	}
	idx := map[string]int{}
	for i, nd := range g.nodes {
		idx[nd.name] = i
	}
	// eff returns the logical time node i reached condition c (0: never).
	eff := func(i int, c cs.Condition) int64 {
		for ; c >= cs.Started; c-- {
			has := c == cs.Started || (c == cs.Ready && g.nodes[i].hasReady) || (c == cs.Completed && g.nodes[i].hasComplete)
			if has {
				return rec.done[i][c]
			}
		}
		return 0
	}
	allOK := true
	for i, r := range rep.Results {
		nd := g.nodes[i]
		if r.Name != nd.name {
			t.Fatalf("result %d is %q, want %q", i, r.Name, nd.name)
		}
		if got, ok := rep.Result(nd.name); !ok || got.Name != nd.name {
			t.Fatalf("Report.Result(%q) = %v, %v", nd.name, got, ok)
		}
		if rec.finished[nd.name] != 1 {
			t.Fatalf("finished hook called %d times for %q", rec.finished[nd.name], nd.name)
		}
		if r.EndTime.IsZero() {
			t.Fatalf("%q: zero EndTime", nd.name)
		}
		started := rec.enter[i] > 0
		if started != !r.StartTime.IsZero() {
			t.Fatalf("%q: Start called = %v but StartTime = %v", nd.name, started, r.StartTime)
		}
		// No node starts before its dependencies are satisfied.
		if started {
			for _, d := range nd.deps {
				at := eff(d.to, d.cond)
				if at == 0 || at > rec.enter[i] {
					t.Fatalf("%q started at %d before %q reached %s (at %d)", nd.name, rec.enter[i], g.nodes[d.to].name, d.cond, at)
				}
			}
		}
		switch r.Outcome {
		case cs.Succeeded:
			if !started || r.Err != nil || r.Reached != cs.Completed || nd.failAt != 0 && eff(i, nd.failAt) == 0 {
				t.Fatalf("%q: bad success %+v", nd.name, r)
			}
		case cs.Failed:
			if nd.failAt == 0 || !started || r.Err == nil {
				t.Fatalf("%q: unexpected failure %+v", nd.name, r)
			}
		case cs.Skipped, cs.Canceled:
			if r.Reason == "" {
				t.Fatalf("%q: %s without reason", nd.name, r.Outcome)
			}
			if r.Outcome == cs.Skipped && (started || r.Cause == "" || !strings.Contains(r.Reason, strconv.Quote(r.Cause))) {
				t.Fatalf("%q: bad skip %+v", nd.name, r)
			}
			if r.Cause != "" {
				if c, ok := rep.Result(r.Cause); !ok || c.Outcome != cs.Failed {
					t.Fatalf("%q: cause %q is not a failed node", nd.name, r.Cause)
				}
			}
		default:
			t.Fatalf("%q: invalid outcome %v", nd.name, r.Outcome)
		}
		allOK = allOK && r.Outcome == cs.Succeeded
	}
	if allOK != (runErr == nil) {
		t.Fatalf("all succeeded = %v but Run error = %v", allOK, runErr)
	}
	if runErr != nil {
		var re *cs.RunError
		if !errors.As(runErr, &re) {
			t.Fatalf("Run error %T is not *RunError", runErr)
		}
	}
	if g.maxParallel > 0 && rec.maxFlight.Load() > int64(g.maxParallel) {
		t.Fatalf("%d Starts in flight, bound %d", rec.maxFlight.Load(), g.maxParallel)
	}
	if got := rec.startHooks.Load(); got != rec.starts.Load() {
		t.Fatalf("started hook %d times for %d starts", got, rec.starts.Load())
	}
	canceled := g.cancelAfter > 0 && int(rec.starts.Load()) >= g.cancelAfter
	if canceled {
		// A run canceled after its last Start began may still succeed.
		if runErr != nil && !errors.Is(runErr, context.Canceled) {
			t.Fatalf("canceled run returned %v", runErr)
		}
		for i, r := range rep.Results {
			if r.Outcome == cs.Canceled && rec.enter[i] == 0 && !errors.Is(r.Err, context.Canceled) {
				t.Fatalf("%q canceled before start with error %v", g.nodes[i].name, r.Err)
			}
		}
		return
	}
	for i, r := range rep.Results {
		if r.Outcome == cs.Canceled && g.policy != cs.FailFast {
			t.Fatalf("%q canceled without cancellation or fail-fast", g.nodes[i].name)
		}
	}
	if g.policy == cs.ContinueIndependent {
		// Every node not downstream of a failure completes; the others are
		// skipped: the outcome is exactly determined.
		want := expectedOutcomes(g)
		for i, r := range rep.Results {
			if r.Outcome != want[i] {
				t.Fatalf("%q: outcome %s, want %s (%+v)", g.nodes[i].name, r.Outcome, want[i], r)
			}
		}
		return
	}
	// FailFast: either nothing failed and everything succeeded, or every node
	// not started is skipped because of a failed node.
	failed := rep.Count(cs.Failed) > 0
	for i, r := range rep.Results {
		if !failed && r.Outcome != cs.Succeeded {
			t.Fatalf("%q: %s without any failure", g.nodes[i].name, r.Outcome)
		}
		if failed && r.Outcome == cs.Skipped && r.Cause == "" {
			t.Fatalf("%q: skipped without a cause", g.nodes[i].name)
		}
	}
}

// expectedOutcomes is the ContinueIndependent oracle: a node is Skipped if
// an edge it waits for can never be met, Failed if it fails itself,
// Succeeded otherwise.
func expectedOutcomes(g genGraph) []cs.Outcome {
	n := len(g.nodes)
	out := make([]cs.Outcome, n)
	var eval func(int) cs.Outcome
	eval = func(i int) cs.Outcome {
		if out[i] != 0 {
			return out[i]
		}
		o := cs.Succeeded
		for _, d := range g.nodes[i].deps {
			switch eval(d.to) {
			case cs.Skipped:
				o = cs.Skipped
			case cs.Failed:
				if g.nodes[d.to].failAt <= d.cond {
					o = cs.Skipped
				}
			}
		}
		if o == cs.Succeeded && g.nodes[i].failAt != 0 {
			o = cs.Failed
		}
		out[i] = o
		return o
	}
	for i := range g.nodes {
		eval(i)
	}
	return out
}

// checkCyclePath asserts that path is a real cycle of nodes.
func checkCyclePath(t *testing.T, nodes []cs.Node, path []string) {
	t.Helper()
	if len(path) < 2 || path[0] != path[len(path)-1] {
		t.Fatalf("cycle path %v does not close", path)
	}
	deps := map[string][]string{}
	for _, nd := range nodes {
		for _, d := range nd.DependsOn {
			deps[nd.Name] = append(deps[nd.Name], d.Node)
		}
	}
	for k := 0; k+1 < len(path); k++ {
		if !slices.Contains(deps[path[k]], path[k+1]) {
			t.Fatalf("cycle path %v: %q does not depend on %q", path, path[k], path[k+1])
		}
	}
}
