package concurrentstart_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cs "github.com/syncpod/syncpod/concurrentstart"
	clocktesting "k8s.io/utils/clock/testing"
)

// log records the order of events across node functions.
type log struct {
	mu     sync.Mutex
	events []string
}

func (l *log) add(s string) {
	l.mu.Lock()
	l.events = append(l.events, s)
	l.mu.Unlock()
}

func (l *log) fn(s string, err error) cs.Func {
	return func(context.Context) error { l.add(s); return err }
}

func (l *log) index(s string) int { return slices.Index(l.events, s) }

func mustRun(t *testing.T, nodes []cs.Node, opts ...cs.Option) (cs.Report, error) {
	t.Helper()
	p, err := cs.New(nodes, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p.Run(context.Background())
}

func outcomes(rep cs.Report) map[string]cs.Outcome {
	m := map[string]cs.Outcome{}
	for _, r := range rep.Results {
		m[r.Name] = r.Outcome
	}
	return m
}

// TestRunConditions checks that each edge kind waits for exactly its
// condition: the started-dependent may run before the dependency is ready,
// the ready-dependent not before it is ready, the completed one not before
// it completes.
func TestRunConditions(t *testing.T) {
	var l log
	readyGate := make(chan struct{})
	a := cs.Node{Name: "a", Start: l.fn("a:start", nil),
		Ready: func(ctx context.Context) error {
			<-readyGate // released only once "s" has started
			l.add("a:ready")
			return nil
		},
		Complete: l.fn("a:complete", nil)}
	s := cs.Node{Name: "s", DependsOn: []cs.Dependency{cs.AfterStarted("a")},
		Start: func(context.Context) error { l.add("s:start"); close(readyGate); return nil }}
	r := cs.Node{Name: "r", DependsOn: []cs.Dependency{cs.AfterReady("a")}, Start: l.fn("r:start", nil)}
	c := cs.Node{Name: "c", DependsOn: []cs.Dependency{cs.AfterCompleted("a")}, Start: l.fn("c:start", nil)}
	rep, err := mustRun(t, []cs.Node{c, r, s, a})
	if err != nil {
		t.Fatal(err)
	}
	before := func(x, y string) {
		t.Helper()
		if l.index(x) < 0 || l.index(y) < 0 || l.index(x) > l.index(y) {
			t.Errorf("%s not before %s: %v", x, y, l.events)
		}
	}
	before("a:start", "s:start")
	before("s:start", "a:ready")
	before("a:ready", "r:start")
	before("a:complete", "c:start")
	for _, res := range rep.Results {
		if res.Outcome != cs.Succeeded || res.Reached != cs.Completed {
			t.Errorf("%+v", res)
		}
	}
}

// TestRunMaxParallelBoundsStarts holds Start functions until the bound is
// reached and checks it is never exceeded, while Ready waits (which do not
// take a slot) run past it.
func TestRunMaxParallelBoundsStarts(t *testing.T) {
	const bound, total = 3, 12
	entered := make(chan struct{}, total)
	release := make(chan struct{})
	readyWaiting := make(chan struct{}, total)
	readyRelease := make(chan struct{})
	var inFlight, maxFlight atomic.Int64
	var nodes []cs.Node
	for i := range total {
		nodes = append(nodes, cs.Node{
			Name: string(rune('a' + i)),
			Start: func(context.Context) error {
				f := inFlight.Add(1)
				for m := maxFlight.Load(); f > m && !maxFlight.CompareAndSwap(m, f); m = maxFlight.Load() {
				}
				entered <- struct{}{}
				<-release
				inFlight.Add(-1)
				return nil
			},
			Ready: func(context.Context) error { readyWaiting <- struct{}{}; <-readyRelease; return nil },
		})
	}
	p, err := cs.New(nodes, cs.WithMaxParallel(bound))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { _, err := p.Run(context.Background()); done <- err }()
	for range bound {
		<-entered
	}
	close(release)
	// Every node reaches its Ready wait while all earlier Ready waits are
	// still blocked: waits do not hold start slots.
	for range total {
		<-readyWaiting
	}
	close(readyRelease)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := maxFlight.Load(); got != bound {
		t.Fatalf("max Starts in flight = %d, want %d", got, bound)
	}
}

// TestRunContinueIndependent: a's readiness check fails. The node gated on
// a having started still runs; those gated on a being ready are skipped,
// transitively, with the reason; the independent node runs.
func TestRunContinueIndependent(t *testing.T) {
	boom := errors.New("probe failed")
	var l log
	nodes := []cs.Node{
		{Name: "a", Start: l.fn("a", nil), Ready: func(context.Context) error { return boom }},
		{Name: "started-dep", DependsOn: []cs.Dependency{cs.AfterStarted("a")}, Start: l.fn("started-dep", nil)},
		{Name: "ready-dep", DependsOn: []cs.Dependency{cs.AfterReady("a")}, Start: l.fn("ready-dep", nil)},
		{Name: "transitive", DependsOn: []cs.Dependency{cs.AfterStarted("ready-dep")}, Start: l.fn("transitive", nil)},
		{Name: "independent", Start: l.fn("independent", nil)},
	}
	rep, err := mustRun(t, nodes)
	want := map[string]cs.Outcome{"a": cs.Failed, "started-dep": cs.Succeeded, "ready-dep": cs.Skipped,
		"transitive": cs.Skipped, "independent": cs.Succeeded}
	if got := outcomes(rep); !mapsEqual(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	var re *cs.RunError
	var ne *cs.NodeError
	if !errors.As(err, &re) || !slices.Equal(re.Failed, []string{"a"}) || !slices.Equal(re.Skipped, []string{"ready-dep", "transitive"}) {
		t.Fatalf("err = %v", err)
	}
	if !errors.Is(err, boom) || !errors.As(err, &ne) || ne.Node != "a" || ne.Phase != cs.Ready {
		t.Fatalf("err = %v, node error %+v", err, ne)
	}
	res, _ := rep.Result("ready-dep")
	if res.Reason != `dependency "a" failed` || res.Cause != "a" || !res.StartTime.IsZero() {
		t.Fatalf("ready-dep: %+v", res)
	}
	res, _ = rep.Result("transitive")
	if res.Reason != `dependency "ready-dep" was skipped because "a" failed` || res.Cause != "a" {
		t.Fatalf("transitive: %+v", res)
	}
}

// TestRunFailFast: b fails while a is in flight and c is queued behind the
// bound. a sees its context canceled with the fail-fast cause; c and the
// dependent d are skipped naming b.
func TestRunFailFast(t *testing.T) {
	boom := errors.New("create failed")
	aRunning := make(chan struct{})
	var causeSeen atomic.Value
	nodes := []cs.Node{
		{Name: "a", Start: func(ctx context.Context) error {
			close(aRunning)
			<-ctx.Done()
			causeSeen.Store(context.Cause(ctx).Error())
			return ctx.Err()
		}},
		{Name: "b", Start: func(context.Context) error { <-aRunning; return boom }},
		{Name: "c", Start: noop},
		{Name: "d", DependsOn: []cs.Dependency{cs.AfterCompleted("a")}, Start: noop},
	}
	rep, err := mustRun(t, nodes, cs.WithFailurePolicy(cs.FailFast), cs.WithMaxParallel(2))
	want := map[string]cs.Outcome{"a": cs.Canceled, "b": cs.Failed, "c": cs.Skipped, "d": cs.Skipped}
	if got := outcomes(rep); !mapsEqual(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	for _, name := range []string{"a", "c", "d"} {
		res, _ := rep.Result(name)
		if res.Cause != "b" || res.Reason != `fail-fast: node "b" failed` {
			t.Errorf("%s: %+v", name, res)
		}
	}
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if got, _ := causeSeen.Load().(string); got != `concurrentstart: fail-fast: node "b" failed: create failed` {
		t.Fatalf("cause seen by a: %q", got)
	}
}

// TestRunCancel: the caller cancels while a is in flight; nothing else is
// started, the rest is Canceled, and Run returns only after a returned.
func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var aReturned, laterCalled atomic.Bool
	nodes := []cs.Node{
		{Name: "a", Start: func(ctx context.Context) error {
			cancel()
			<-ctx.Done()
			aReturned.Store(true)
			return ctx.Err()
		}},
		{Name: "b", DependsOn: []cs.Dependency{cs.AfterStarted("a")}, Start: func(context.Context) error { laterCalled.Store(true); return nil }},
		{Name: "c", Start: func(context.Context) error { laterCalled.Store(true); return nil }},
	}
	p, err := cs.New(nodes, cs.WithMaxParallel(1))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := p.Run(ctx)
	if !aReturned.Load() || laterCalled.Load() {
		t.Fatalf("a returned %v, later node called %v", aReturned.Load(), laterCalled.Load())
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	want := map[string]cs.Outcome{"a": cs.Canceled, "b": cs.Canceled, "c": cs.Canceled}
	if got := outcomes(rep); !mapsEqual(got, want) {
		t.Fatalf("outcomes %v", got)
	}
	if res, _ := rep.Result("b"); !errors.Is(res.Err, context.Canceled) || res.Reason == "" {
		t.Fatalf("b: %+v", res)
	}
}

func TestRunAlreadyCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var called atomic.Bool
	p, err := cs.New([]cs.Node{{Name: "a", Start: func(context.Context) error { called.Store(true); return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := p.Run(ctx)
	if called.Load() || rep.Count(cs.Canceled) != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("called %v, report %+v, err %v", called.Load(), rep, err)
	}
}

// TestRunCanceledBetweenPhases: the run is canceled after Start returned
// nil; the Ready function is not called and the node is Canceled with
// Reached = Started.
func TestRunCanceledBetweenPhases(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var readyCalled atomic.Bool
	p, err := cs.New([]cs.Node{{Name: "a",
		Start: func(context.Context) error { cancel(); return nil },
		Ready: func(context.Context) error { readyCalled.Store(true); return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := p.Run(ctx)
	if res := rep.Results[0]; readyCalled.Load() || res.Outcome != cs.Canceled || res.Reached != cs.Started {
		t.Fatalf("ready called %v, %+v", readyCalled.Load(), res)
	}
}

// TestRunTimesAndHooks uses a fake clock to check StartTime/EndTime and that
// every observer call happens before Run returns.
func TestRunTimesAndHooks(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	var mu sync.Mutex
	var hooks []string
	nodes := []cs.Node{
		{Name: "a", Start: func(context.Context) error { clk.SetTime(t0.Add(time.Second)); return nil }},
		{Name: "b", DependsOn: []cs.Dependency{cs.AfterCompleted("a")}, Start: func(context.Context) error {
			clk.SetTime(t0.Add(3 * time.Second))
			return errors.New("no")
		}},
		{Name: "c", DependsOn: []cs.Dependency{cs.AfterStarted("b")}, Start: noop},
	}
	rep, _ := mustRun(t, nodes, cs.WithClock(clk),
		cs.WithObserver(func(ev cs.Event) {
			mu.Lock()
			defer mu.Unlock()
			if ev.Kind == cs.NodeStarted {
				hooks = append(hooks, "start:"+ev.Node+"@"+ev.Time.Sub(t0).String())
				return
			}
			if !ev.Time.Equal(ev.Result.EndTime) || ev.Node != ev.Result.Name {
				hooks = append(hooks, "bad event "+ev.Node)
			}
			hooks = append(hooks, "finish:"+ev.Node+":"+ev.Result.Outcome.String()+"@"+ev.Time.Sub(t0).String())
		}))
	a, _ := rep.Result("a")
	b, _ := rep.Result("b")
	if !a.StartTime.Equal(t0) || !a.EndTime.Equal(t0.Add(time.Second)) ||
		!b.StartTime.Equal(t0.Add(time.Second)) || !b.EndTime.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("times: a %v..%v, b %v..%v", a.StartTime, a.EndTime, b.StartTime, b.EndTime)
	}
	want := []string{"start:a@0s", "finish:a:Succeeded@1s", "start:b@1s", "finish:b:Failed@3s", "finish:c:Skipped@3s"}
	if !slices.Equal(hooks, want) {
		t.Fatalf("hooks %v, want %v", hooks, want)
	}
}

// TestRunTwice: a Plan is reusable; each run calls the functions again and
// reports independently.
func TestRunTwice(t *testing.T) {
	var calls atomic.Int64
	fail := atomic.Bool{}
	fail.Store(true)
	p, err := cs.New([]cs.Node{{Name: "a", Start: func(context.Context) error {
		calls.Add(1)
		if fail.Swap(false) {
			return errors.New("first time")
		}
		return nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	first, err1 := p.Run(context.Background())
	second, err2 := p.Run(context.Background())
	if calls.Load() != 2 || err1 == nil || err2 != nil ||
		first.Results[0].Outcome != cs.Failed || second.Results[0].Outcome != cs.Succeeded {
		t.Fatalf("calls %d, %v %v, %v %v", calls.Load(), first.Results, err1, second.Results, err2)
	}
}

func TestRunEmptyPlan(t *testing.T) {
	rep, err := mustRun(t, nil)
	if err != nil || len(rep.Results) != 0 {
		t.Fatalf("%v %v", rep, err)
	}
	if _, ok := rep.Result("x"); ok {
		t.Fatal("found a result in an empty report")
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
