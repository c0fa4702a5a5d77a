package podplan_test

import (
	"context"
	"errors"
	"strings"
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
		{"nil pod", nil, rt.funcs(), nil, is(new(*podplan.ArgError))},
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
		{"duplicate container names are a ConfigError", pod(nil, []corev1.Container{regular("a"), regular("a")}, ""), rt.funcs(), nil, is(new(*podplan.ConfigError))},
		{"empty container name", pod(nil, []corev1.Container{regular("")}, ""), rt.funcs(), nil, is(new(*podplan.ConfigError))},
		{"unknown init restartPolicy", pod([]corev1.Container{withPolicy(initC("i1"), "Sometimes")}, regs, ""), rt.funcs(), nil, is(new(*podplan.ConfigError))},
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

func withPolicy(c corev1.Container, p corev1.ContainerRestartPolicy) corev1.Container {
	c.RestartPolicy = &p
	return c
}

// Each argument and spec error says which function, argument or field is
// wrong, and what is wrong with it; a nil pod is not a state error.
func TestMisuseErrorsSayWhatAndWhere(t *testing.T) {
	rt := &fakeRuntime{}
	regs := []corev1.Container{regular("a"), regular("b")}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want func(error) bool
		msg  string
	}{
		{"nil pod", nil, func(err error) bool {
			var ae *podplan.ArgError
			var se *podplan.StateError
			return errors.As(err, &ae) && ae.Method == "Build" && ae.Arg == "pod" && !errors.As(err, &se)
		}, "podplan: Build: pod must not be nil"},
		{"duplicate across init and regular containers", pod([]corev1.Container{initC("x")}, []corev1.Container{regular("a"), regular("x")}, ""), func(err error) bool {
			var ce *podplan.ConfigError
			var de *cs.DuplicateNodeError
			return errors.As(err, &ce) && ce.Option == "pod.spec.containers[1].name" &&
				errors.As(err, &de) && de.Name == "x" && de.First == 0 && de.Second == 2
		}, `podplan: pod.spec.containers[1].name: "x" is also the name of pod.spec.initContainers[0]`},
		{"empty name", pod([]corev1.Container{initC("")}, regs, ""), func(err error) bool {
			var ce *podplan.ConfigError
			return errors.As(err, &ce) && ce.Option == "pod.spec.initContainers[0].name"
		}, "podplan: pod.spec.initContainers[0].name: must not be empty"},
		{"unknown init restartPolicy", pod([]corev1.Container{initC("i1"), withPolicy(initC("i2"), "always")}, regs, ""), func(err error) bool {
			var ce *podplan.ConfigError
			return errors.As(err, &ce) && ce.Option == "pod.spec.initContainers[1].restartPolicy"
		}, `podplan: pod.spec.initContainers[1].restartPolicy: "always" (container "i2") is not Always, OnFailure or Never`},
		{"unknown regular restartPolicy", pod(nil, []corev1.Container{regular("a"), withPolicy(regular("b"), "")}, ""), func(err error) bool {
			var ce *podplan.ConfigError
			return errors.As(err, &ce) && ce.Option == "pod.spec.containers[1].restartPolicy"
		}, `podplan: pod.spec.containers[1].restartPolicy: "" (container "b") is not Always, OnFailure or Never`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := podplan.Build(tt.pod, rt.funcs())
			if err == nil || !tt.want(err) || !errors.Is(err, cs.ErrInvalidPlan) {
				t.Fatalf("Build error %T %v: wrong type, fields or not ErrInvalidPlan", err, err)
			}
			if got := err.Error(); got != tt.msg {
				t.Fatalf("Build error %q, want %q", got, tt.msg)
			}
		})
	}
}

// An init container with restartPolicy OnFailure or Never is a regular init
// container (it must complete); Always makes it a sidecar.
func TestMisuseKnownRestartPolicies(t *testing.T) {
	rt := &fakeRuntime{}
	for _, policy := range []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever} {
		nodes, err := podplan.Build(pod([]corev1.Container{withPolicy(initC("i1"), policy)}, []corev1.Container{regular("a")}, ""), rt.funcs())
		if err != nil {
			t.Fatalf("restartPolicy %s: %v", policy, err)
		}
		if len(nodes) != 2 || nodes[0].Complete == nil {
			t.Fatalf("restartPolicy %s: init container planned as %+v, want one that must complete", policy, nodes)
		}
	}
}

// The zero errors print without panicking and name the package.
func TestMisuseZeroErrors(t *testing.T) {
	for _, err := range []error{&podplan.ArgError{}, &podplan.ConfigError{}, &podplan.StateError{}, &podplan.MissingFuncError{}, &podplan.AnnotationError{}, &podplan.UnknownContainerError{}, &podplan.OrderingError{}} {
		if msg := err.Error(); !strings.HasPrefix(msg, "podplan:") {
			t.Errorf("%T.Error() = %q", err, msg)
		}
		if !errors.Is(err, cs.ErrInvalidPlan) {
			t.Errorf("%T does not match ErrInvalidPlan", err)
		}
	}
}
