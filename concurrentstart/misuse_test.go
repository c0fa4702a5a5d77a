package concurrentstart_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/utils/clock"

	cs "github.com/syncpod/syncpod/concurrentstart"
)

func TestMisuseOptions(t *testing.T) {
	var nilClock *clock.RealClock
	for name, opt := range map[string]cs.Option{
		"negative parallel": cs.WithMaxParallel(-1),
		"unknown policy":    cs.WithFailurePolicy(cs.FailurePolicy(7)),
		"nil clock":         cs.WithClock(nil),
		"typed-nil clock":   cs.WithClock(nilClock),
	} {
		_, err := cs.New([]cs.Node{{Name: "a", Start: noop}}, opt)
		var ce *cs.ConfigError
		if !errors.As(err, &ce) || ce.Option == "" || ce.Reason == "" {
			t.Errorf("%s: New: %v, want *ConfigError", name, err)
		}
		if errors.Is(err, cs.ErrInvalidPlan) {
			t.Errorf("%s: a bad option matches ErrInvalidPlan: %v", name, err)
		}
	}
	_, err := cs.New(nil, cs.WithMaxParallel(-3))
	if got, want := err.Error(), "concurrentstart: WithMaxParallel: -3 is negative"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if _, err := cs.New([]cs.Node{{Name: "a", Start: noop}}, nil, cs.WithObserver(nil)); err != nil {
		t.Errorf("a nil Option and a nil observer must be accepted: %v", err)
	}
}

// TestMisuseMaxParallelZero: 0 is unlimited, so n Starts that each wait for
// all n to have begun can finish.
func TestMisuseMaxParallelZero(t *testing.T) {
	const n = 16
	var begun atomic.Int32
	all := make(chan struct{})
	nodes := make([]cs.Node, n)
	for i := range nodes {
		nodes[i] = cs.Node{Name: string(rune('a' + i)), Start: func(ctx context.Context) error {
			if begun.Add(1) == n {
				close(all)
			}
			select {
			case <-all:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
	}
	if _, err := mustRun(t, nodes, cs.WithMaxParallel(0)); err != nil {
		t.Fatal(err)
	}
}

func TestMisuseRun(t *testing.T) {
	var called atomic.Bool
	p, err := cs.New([]cs.Node{{Name: "a", Start: func(context.Context) error { called.Store(true); return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	rep, err := p.Run(nilCtx)
	var ae *cs.ArgError
	if !errors.As(err, &ae) || ae.Method != "Run" || ae.Arg != "ctx" || errors.Is(err, cs.ErrInvalidPlan) {
		t.Fatalf("Run(nil): %v, want *ArgError for ctx", err)
	}
	if err.Error() != "concurrentstart: Run: ctx must not be nil" {
		t.Errorf("message %q", err)
	}
	if called.Load() || len(rep.Results) != 0 {
		t.Fatalf("Run(nil) called %v, report %+v", called.Load(), rep)
	}

	var nilPlan *cs.Plan
	if _, err := nilPlan.Run(context.Background()); !errors.As(err, &ae) || ae.Arg != "Plan" {
		t.Errorf("nil *Plan: %v, want *ArgError", err)
	}
	var zero cs.Plan
	if rep, err := zero.Run(context.Background()); err != nil || len(rep.Results) != 0 || zero.Len() != 0 {
		t.Errorf("zero Plan: %+v %v, want an empty run", rep, err)
	}
	var zeroRep cs.Report
	if _, ok := zeroRep.Result("a"); ok || zeroRep.Count(cs.Succeeded) != 0 {
		t.Error("zero Report has results")
	}
}

// TestMisuseObserverPanic: an observer panicking in the goroutine calling
// Run reaches the caller unchanged, and the node still in flight sees its
// context canceled and returns (goleak checks it is gone).
func TestMisuseObserverPanic(t *testing.T) {
	type boom struct{}
	inFlight := make(chan struct{})
	stopped := make(chan error, 1)
	p, err := cs.New([]cs.Node{
		{Name: "slow", Start: func(ctx context.Context) error {
			close(inFlight)
			<-ctx.Done()
			stopped <- context.Cause(ctx)
			return ctx.Err()
		}},
		{Name: "gate", Start: func(context.Context) error { <-inFlight; return errors.New("no") }},
		{Name: "after", Start: noop, DependsOn: []cs.Dependency{cs.AfterStarted("gate")}},
	}, cs.WithObserver(func(ev cs.Event) {
		if ev.Kind == cs.NodeFinished && ev.Node == "after" { // Skipped: told from Run's goroutine
			panic(boom{})
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if v := recover(); v != (boom{}) {
				t.Errorf("recovered %v, want the observer's value", v)
			}
		}()
		_, _ = p.Run(context.Background())
		t.Error("Run returned")
	}()
	if cause := <-stopped; cause == nil {
		t.Error("in-flight node's context not canceled")
	}
}

// TestMisuseNodePanic: a panic in a node function is not recovered; it
// ends the program with the node's own stack.
func TestMisuseNodePanic(t *testing.T) {
	if os.Getenv("CONCURRENTSTART_PANIC_CHILD") == "1" {
		p, _ := cs.New([]cs.Node{{Name: "a", Start: func(context.Context) error { panic("kaboom") }}})
		_, _ = p.Run(context.Background())
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMisuseNodePanic$")
	cmd.Env = append(os.Environ(), "CONCURRENTSTART_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("child did not crash:\n%s", out)
	}
	if !strings.Contains(string(out), "panic: kaboom") || !strings.Contains(string(out), "TestMisuseNodePanic") {
		t.Fatalf("child output lacks the panic and its stack:\n%s", out)
	}
}
