package podplan_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	cs "github.com/syncpod/syncpod/concurrentstart"
	"github.com/syncpod/syncpod/concurrentstart/podplan"
	corev1 "k8s.io/api/core/v1"
)

// FuzzBuild feeds arbitrary start-order annotations and container states to
// Build for a pod with init containers, sidecars and regular containers:
// Build either returns an ErrInvalidPlan error or a plan that runs to
// success, starts nothing that is running or completed, and keeps every
// edge.
func FuzzBuild(f *testing.F) {
	f.Add(`{"a": ["b"], "c": ["b:started", "d:ready"]}`, "", "")
	f.Add(`{"a": ["b"]}`, "s1,b", "i1")
	f.Add(`{"a": ["b"], "b": ["a"]}`, "", "")
	f.Add(`{"a": ["i1"]}`, "", "")
	f.Add(`not json`, "ghost", "")
	f.Add(``, "s2,i2,a", "i1,d")
	f.Add(`{"d": [":ready", "a:completed"]}`, "", "s1")
	f.Fuzz(func(t *testing.T, annotation, running, completed string) {
		p := pod(
			[]corev1.Container{initC("i1"), sidecar("s1", true), initC("i2"), sidecar("s2", false)},
			[]corev1.Container{regular("a"), func() corev1.Container { c := regular("b"); c.StartupProbe = &corev1.Probe{}; return c }(), regular("c"), regular("d")},
			"")
		p.Annotations = map[string]string{podplan.AnnotationStartAfter: annotation}
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		rt := &fakeRuntime{}
		nodes, err := podplan.Build(p, rt.funcs(), podplan.WithRunning(split(running)...), podplan.WithCompleted(split(completed)...))
		if err != nil {
			if !errors.Is(err, cs.ErrInvalidPlan) {
				t.Fatalf("Build error %v does not match ErrInvalidPlan", err)
			}
			return
		}
		checkRun(t, nodes, rt)
		for _, name := range append(split(running), split(completed)...) {
			if slices.Contains(rt.log, "start:"+name) {
				t.Fatalf("%s is running or completed but was started: %v", name, rt.log)
			}
		}
		for _, name := range split(completed) {
			if slices.ContainsFunc(nodes, func(n cs.Node) bool { return n.Name == name }) {
				t.Fatalf("completed %s has a node", name)
			}
		}
	})
}
