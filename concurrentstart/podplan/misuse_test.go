package podplan_test

import (
	"context"
	"errors"
	"testing"

	cs "github.com/syncpod/syncpod/concurrentstart"
	"github.com/syncpod/syncpod/concurrentstart/podplan"
	corev1 "k8s.io/api/core/v1"
)

// Bad input to Build is a typed error matching concurrentstart.ErrInvalidPlan,
// never a panic, and the errors read as "podplan: ...".
func TestMisuse(t *testing.T) {
	rt := &fakeRuntime{}
	regs := []corev1.Container{regular("a"), regular("b")}
	inits := []corev1.Container{initC("i1")}
	noWaitCompleted := rt.funcs()
	noWaitCompleted.WaitCompleted = nil
	checkWithoutWait := rt.funcs()
	checkWithoutWait.WaitStartup = nil
	checkWithoutWait.HasStartupCheck = func(podplan.Container) bool { return true }

	is := func(target any) func(error) bool {
		return func(err error) bool { return errors.As(err, target) }
	}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		funcs podplan.Funcs
		opts  []podplan.Option
		match func(error) bool
	}{
		{"nil pod", nil, rt.funcs(), nil, is(new(*podplan.StateError))},
		{"zero Funcs", pod(nil, regs, ""), podplan.Funcs{}, nil, is(new(*podplan.MissingFuncError))},
		{"HasStartupCheck without WaitStartup", pod(nil, regs, ""), checkWithoutWait, nil, is(new(*podplan.MissingFuncError))},
		{"init container without WaitCompleted", pod(inits, regs, ""), noWaitCompleted, nil, is(new(*podplan.MissingFuncError))},
		{"WithRunning of an unknown container", pod(nil, regs, ""), rt.funcs(), []podplan.Option{podplan.WithRunning("ghost")}, is(new(*podplan.UnknownContainerError))},
		{"WithCompleted of an unknown container", pod(nil, regs, ""), rt.funcs(), []podplan.Option{podplan.WithCompleted("ghost")}, is(new(*podplan.UnknownContainerError))},
		{"running and completed", pod(inits, regs, ""), rt.funcs(), []podplan.Option{podplan.WithRunning("i1"), podplan.WithCompleted("i1")}, is(new(*podplan.StateError))},
		{"annotation not JSON", pod(nil, regs, "{"), rt.funcs(), nil, is(new(*podplan.AnnotationError))},
		{"annotation names an unknown container", pod(nil, regs, `{"a": ["ghost"]}`), rt.funcs(), nil, is(new(*podplan.UnknownContainerError))},
		{"cycle", pod(nil, regs, `{"a": ["b"], "b": ["a"]}`), rt.funcs(), nil, is(new(*cs.CycleError))},
		{"duplicate container names", pod(nil, []corev1.Container{regular("a"), regular("a")}, ""), rt.funcs(), nil, is(new(*cs.DuplicateNodeError))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, err := podplan.Build(tt.pod, tt.funcs, tt.opts...)
			if err == nil {
				t.Fatalf("Build = %d nodes, want an error", len(nodes))
			}
			if !tt.match(err) || !errors.Is(err, cs.ErrInvalidPlan) {
				t.Fatalf("Build error %T %v: wrong type or not ErrInvalidPlan", err, err)
			}
			if msg := err.Error(); len(msg) < 8 || msg[:8] != "podplan:" {
				t.Fatalf("Build error %q does not name the package", msg)
			}
		})
	}
}

// A nil Option is ignored, and a valid plan run with a nil ctx is the
// executor's *ArgError, not a panic.
func TestMisuseNilOptionAndNilContext(t *testing.T) {
	rt := &fakeRuntime{}
	nodes, err := podplan.Build(pod(nil, []corev1.Container{regular("a")}, ""), rt.funcs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cs.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	_, err = p.Run(nilCtx)
	var ae *cs.ArgError
	if !errors.As(err, &ae) {
		t.Fatalf("Run(nil) = %T %v, want *concurrentstart.ArgError", err, err)
	}
}
