package podplan_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	cs "github.com/syncpod/syncpod/concurrentstart"
	"github.com/syncpod/syncpod/concurrentstart/podplan"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var always = corev1.ContainerRestartPolicyAlways

func initC(name string) corev1.Container { return corev1.Container{Name: name, Image: "img"} }

func sidecar(name string, probe bool) corev1.Container {
	c := corev1.Container{Name: name, Image: "img", RestartPolicy: &always}
	if probe {
		c.StartupProbe = &corev1.Probe{}
	}
	return c
}

func regular(name string) corev1.Container { return corev1.Container{Name: name, Image: "img"} }

func pod(inits []corev1.Container, regs []corev1.Container, startAfter string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.PodSpec{InitContainers: inits, Containers: regs}}
	if startAfter != "" {
		p.Annotations = map[string]string{podplan.AnnotationStartAfter: startAfter}
	}
	return p
}

// fakeRuntime records every call in order.
type fakeRuntime struct {
	mu  sync.Mutex
	log []string
}

func (f *fakeRuntime) add(s string) {
	f.mu.Lock()
	f.log = append(f.log, s)
	f.mu.Unlock()
}

func (f *fakeRuntime) funcs() podplan.Funcs {
	return podplan.Funcs{
		Start: func(_ context.Context, c podplan.Container) error {
			f.add("start:" + c.Name)
			f.add("started:" + c.Name)
			return nil
		},
		WaitCompleted: func(_ context.Context, c podplan.Container) error { f.add("completed:" + c.Name); return nil },
		WaitStartup:   func(_ context.Context, c podplan.Container) error { f.add("ready:" + c.Name); return nil },
	}
}

// describe renders nodes as "name[SRC] <- dep:cond ..." lines: S, R, C mark
// a Start that really starts, a Ready and a Complete function.
func describe(nodes []cs.Node, runningStart func(cs.Func) bool) []string {
	var out []string
	for _, n := range nodes {
		flags := ""
		if !runningStart(n.Start) {
			flags += "S"
		}
		if n.Ready != nil {
			flags += "R"
		}
		if n.Complete != nil {
			flags += "C"
		}
		line := n.Name + "[" + flags + "]"
		var deps []string
		for _, d := range n.DependsOn {
			deps = append(deps, d.String())
		}
		if len(deps) > 0 {
			line += " <- " + strings.Join(deps, " ")
		}
		out = append(out, line)
	}
	return out
}

func TestBuildPodShapes(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		opts []podplan.Option
		want []string
	}{
		{
			name: "no init containers",
			pod:  pod(nil, []corev1.Container{regular("a"), regular("b"), regular("c")}, ""),
			want: []string{"a[S]", "b[S]", "c[S]"},
		},
		{
			name: "init chain",
			pod:  pod([]corev1.Container{initC("i1"), initC("i2"), initC("i3")}, []corev1.Container{regular("a"), regular("b")}, ""),
			want: []string{"i1[SC]", "i2[SC] <- i1:completed", "i3[SC] <- i2:completed",
				"a[S] <- i3:completed", "b[S] <- i3:completed"},
		},
		{
			name: "sidecars between init containers",
			pod: pod([]corev1.Container{initC("i1"), sidecar("s1", false), initC("i2"), sidecar("s2", false)},
				[]corev1.Container{regular("a"), regular("b")}, ""),
			want: []string{"i1[SC]", "s1[S] <- i1:completed", "i2[SC] <- s1:started", "s2[S] <- i2:completed",
				"a[S] <- s2:started", "b[S] <- s2:started"},
		},
		{
			name: "sidecar with startup check gates on ready",
			pod: pod([]corev1.Container{sidecar("proxy", true), sidecar("log", false), initC("i1"), sidecar("mesh", true)},
				[]corev1.Container{regular("a")}, ""),
			want: []string{"proxy[SR]", "log[S] <- proxy:ready", "i1[SC] <- log:started", "mesh[SR] <- i1:completed",
				"a[S] <- mesh:ready"},
		},
		{
			name: "extra ordering from the annotation",
			pod: pod([]corev1.Container{initC("i1")},
				[]corev1.Container{regular("app"), func() corev1.Container { c := regular("proxy"); c.StartupProbe = &corev1.Probe{}; return c }(),
					regular("worker"), regular("free")},
				`{"app": ["proxy"], "worker": ["app:started", "proxy:started"]}`),
			want: []string{"i1[SC]", "app[S] <- i1:completed proxy:ready", "proxy[SR] <- i1:completed",
				"worker[S] <- i1:completed app:started proxy:started", "free[S] <- i1:completed"},
		},
		{
			name: "partly running pod",
			pod: pod([]corev1.Container{initC("i1"), sidecar("s1", false), sidecar("s2", true), initC("i2")},
				[]corev1.Container{regular("a"), regular("b"), regular("c"), regular("d")},
				`{"b": ["a"], "c": ["d"]}`),
			opts: []podplan.Option{podplan.WithCompleted("i1", "d"), podplan.WithRunning("s1", "s2", "i2", "a")},
			// s1 is running: left out. s2 is running but its startup check
			// gates: it keeps a wait-only node. i2 runs: wait for its exit.
			// b's edge to running a and c's to completed d are met.
			want: []string{"s2[R]", "i2[C] <- s2:ready", "b[S] <- i2:completed", "c[S] <- i2:completed"},
		},
		{
			name: "everything done",
			pod:  pod([]corev1.Container{initC("i1"), sidecar("s1", false)}, []corev1.Container{regular("a")}, ""),
			opts: []podplan.Option{podplan.WithCompleted("i1"), podplan.WithRunning("s1", "a")},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := &fakeRuntime{}
			nodes, err := podplan.Build(tt.pod, rt.funcs(), tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			// A Start that records nothing is the already-running no-op.
			got := describe(nodes, func(fn cs.Func) bool {
				before := len(rt.log)
				_ = fn(context.Background())
				ran := len(rt.log) == before
				rt.log = rt.log[:before]
				return ran
			})
			if !slices.Equal(got, tt.want) {
				t.Fatalf("plan:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			checkRun(t, nodes, rt)
		})
	}
}

// checkRun runs nodes against the fake runtime and checks, from the call
// log, that every container started only after each of its edges was met,
// and that every node succeeded.
func checkRun(t *testing.T, nodes []cs.Node, rt *fakeRuntime) {
	t.Helper()
	rt.log = nil
	p, err := cs.New(nodes, cs.WithMaxParallel(2))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := p.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pos := func(s string) int { return slices.Index(rt.log, s) }
	byName := map[string]cs.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for _, n := range nodes {
		at := pos("start:" + n.Name)
		if at < 0 { // wait-only node of a running container
			continue
		}
		for _, d := range n.DependsOn {
			met := map[cs.Condition]string{cs.Started: "started:", cs.Ready: "ready:", cs.Completed: "completed:"}[d.Condition] + d.Node
			if d.Condition == cs.Ready && byName[d.Node].Ready == nil {
				met = "started:" + d.Node
			}
			if p := pos(met); p < 0 || p > at {
				t.Errorf("%s started before %s: %v", n.Name, met, rt.log)
			}
		}
	}
	if rep.Count(cs.Succeeded) != len(nodes) {
		t.Errorf("results %+v", rep.Results)
	}
}

func TestBuildErrors(t *testing.T) {
	rt := &fakeRuntime{}
	twoRegs := []corev1.Container{regular("a"), regular("b")}
	withInit := []corev1.Container{initC("i1"), sidecar("s1", false)}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		funcs podplan.Funcs
		opts  []podplan.Option
		check func(t *testing.T, err error)
	}{
		{"annotation not JSON", pod(nil, twoRegs, `a after b`), rt.funcs(), nil, func(t *testing.T, err error) {
			var e *podplan.AnnotationError
			if !errors.As(err, &e) || e.Container != "" {
				t.Fatal(err)
			}
		}},
		{"unknown key", pod(nil, twoRegs, `{"ghost": ["a"]}`), rt.funcs(), nil, func(t *testing.T, err error) {
			var e *podplan.UnknownContainerError
			if !errors.As(err, &e) || e.Name != "ghost" || e.Source != "annotation" {
				t.Fatal(err)
			}
		}},
		{"unknown dependency", pod(nil, twoRegs, `{"a": ["b", "ghost"]}`), rt.funcs(), nil, func(t *testing.T, err error) {
			var e *podplan.UnknownContainerError
			if !errors.As(err, &e) || e.Name != "ghost" || e.Container != "a" ||
				err.Error() != `podplan: annotation: container "a" depends on unknown container "ghost"` {
				t.Fatal(err)
			}
		}},
		{"bad condition", pod(nil, twoRegs, `{"a": ["b:completed"]}`), rt.funcs(), nil, func(t *testing.T, err error) {
			var e *podplan.AnnotationError
			if !errors.As(err, &e) || e.Container != "a" || e.Entry != "b:completed" {
				t.Fatal(err)
			}
		}},
		{"empty entry", pod(nil, twoRegs, `{"a": [":ready"]}`), rt.funcs(), nil, func(t *testing.T, err error) {
			var e *podplan.AnnotationError
			if !errors.As(err, &e) || e.Container != "a" {
				t.Fatal(err)
			}
		}},
		{"ordering after an init container", pod(withInit, twoRegs, `{"a": ["i1"]}`), rt.funcs(), nil, func(t *testing.T, err error) {
			var e *podplan.OrderingError
			if !errors.As(err, &e) || e.Container != "a" || e.Dependency != "i1" {
				t.Fatal(err)
			}
		}},
		{"ordering a sidecar", pod(withInit, twoRegs, `{"s1": ["a"]}`), rt.funcs(), nil, func(t *testing.T, err error) {
			var e *podplan.OrderingError
			if !errors.As(err, &e) || e.Container != "s1" {
				t.Fatal(err)
			}
		}},
		{"ordering cycle", pod(nil, []corev1.Container{regular("a"), regular("b"), regular("c")}, `{"a": ["b"], "b": ["c:started"], "c": ["a"]}`),
			rt.funcs(), []podplan.Option{podplan.WithRunning("b")}, func(t *testing.T, err error) {
				var e *cs.CycleError
				if !errors.As(err, &e) || !slices.Equal(e.Path, []string{"a", "b", "c", "a"}) {
					t.Fatal(err)
				}
			}},
		{"duplicate container name", pod([]corev1.Container{initC("x")}, []corev1.Container{regular("x")}, ""), rt.funcs(), nil, func(t *testing.T, err error) {
			var e *cs.DuplicateNodeError
			if !errors.As(err, &e) || e.Name != "x" {
				t.Fatal(err)
			}
		}},
		{"unknown running container", pod(nil, twoRegs, ""), rt.funcs(), []podplan.Option{podplan.WithRunning("ghost")}, func(t *testing.T, err error) {
			var e *podplan.UnknownContainerError
			if !errors.As(err, &e) || e.Name != "ghost" || e.Source != "WithRunning" {
				t.Fatal(err)
			}
		}},
		{"completed sidecar", pod(withInit, twoRegs, ""), rt.funcs(), []podplan.Option{podplan.WithCompleted("s1")}, func(t *testing.T, err error) {
			var e *podplan.StateError
			if !errors.As(err, &e) || e.Container != "s1" {
				t.Fatal(err)
			}
		}},
		{"running and completed", pod(nil, twoRegs, ""), rt.funcs(), []podplan.Option{podplan.WithCompleted("a"), podplan.WithRunning("a")}, func(t *testing.T, err error) {
			var e *podplan.StateError
			if !errors.As(err, &e) || e.Container != "a" {
				t.Fatal(err)
			}
		}},
		{"missing WaitCompleted", pod(withInit, twoRegs, ""), podplan.Funcs{Start: rt.funcs().Start}, nil, func(t *testing.T, err error) {
			var e *podplan.MissingFuncError
			if !errors.As(err, &e) || e.Func != "WaitCompleted" || e.Container != "i1" {
				t.Fatal(err)
			}
		}},
		{"missing Start", pod(nil, twoRegs, ""), podplan.Funcs{}, nil, func(t *testing.T, err error) {
			var e *podplan.MissingFuncError
			if !errors.As(err, &e) || e.Func != "Start" {
				t.Fatal(err)
			}
		}},
		{"nil pod", nil, rt.funcs(), nil, func(t *testing.T, err error) {
			var e *podplan.ArgError
			if !errors.As(err, &e) || e.Method != "Build" || e.Arg != "pod" {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, err := podplan.Build(tt.pod, tt.funcs, tt.opts...)
			if err == nil || nodes != nil || !errors.Is(err, cs.ErrInvalidPlan) {
				t.Fatalf("Build = %v, %v; want an ErrInvalidPlan error", nodes, err)
			}
			tt.check(t, err)
		})
	}
}

// TestBuildMissingWaitCompletedNotNeeded: a pod whose init containers have
// all completed needs no WaitCompleted.
func TestBuildMissingWaitCompletedNotNeeded(t *testing.T) {
	rt := &fakeRuntime{}
	nodes, err := podplan.Build(pod([]corev1.Container{initC("i1")}, []corev1.Container{regular("a")}, ""),
		podplan.Funcs{Start: rt.funcs().Start}, podplan.WithCompleted("i1"))
	if err != nil || len(nodes) != 1 || nodes[0].Name != "a" || len(nodes[0].DependsOn) != 0 {
		t.Fatalf("%v %v", describe(nodes, func(cs.Func) bool { return false }), err)
	}
}

// TestBuildFailedInitSkipsRest: an init container exiting non-zero stops the
// pod's start there, as in Kubernetes; the containers after it are skipped
// with the init container as cause.
func TestBuildFailedInitSkipsRest(t *testing.T) {
	rt := &fakeRuntime{}
	f := rt.funcs()
	f.WaitCompleted = func(_ context.Context, c podplan.Container) error {
		return fmt.Errorf("container %s exited 1", c.Name)
	}
	nodes, err := podplan.Build(pod([]corev1.Container{initC("i1"), sidecar("s1", false)}, []corev1.Container{regular("a")}, ""), f)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cs.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := p.Run(context.Background())
	if err == nil || rep.Count(cs.Failed) != 1 || rep.Count(cs.Skipped) != 2 {
		t.Fatalf("%+v %v", rep.Results, err)
	}
	if r, _ := rep.Result("a"); r.Cause != "i1" {
		t.Fatalf("a: %+v", r)
	}
}

// TestBuildCopiesSpec: the Container passed to funcs is Build's own copy.
func TestBuildCopiesSpec(t *testing.T) {
	p := pod(nil, []corev1.Container{regular("a")}, "")
	var seen string
	nodes, err := podplan.Build(p, podplan.Funcs{Start: func(_ context.Context, c podplan.Container) error {
		seen = c.Spec.Image + "/" + c.Role.String()
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Containers[0].Image = "changed"
	if err := nodes[0].Start(context.Background()); err != nil || seen != "img/regular" {
		t.Fatalf("seen %q, %v", seen, err)
	}
}
