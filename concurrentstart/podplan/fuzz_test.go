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

// FuzzBuildSpec feeds Build pods with arbitrary container names and init
// container restart policies: Build never panics, refuses an empty or
// repeated name and an unknown policy with a *ConfigError naming the
// field, and otherwise returns a plan that runs to success and starts every
// container once.
func FuzzBuildSpec(f *testing.F) {
	f.Add("i1,s1", "a,b", "", "Always")
	f.Add("i1", "a", "OnFailure", "Never")
	f.Add("x", "x", "", "")
	f.Add(",i1", "a", "", "")
	f.Add("i1", "a,", "Sometimes", "")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, inits, regulars, firstPolicy, otherPolicy string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		policy := func(i int) *corev1.ContainerRestartPolicy {
			p := corev1.ContainerRestartPolicy(otherPolicy)
			if i == 0 {
				p = corev1.ContainerRestartPolicy(firstPolicy)
			}
			if p == "" {
				return nil
			}
			return &p
		}
		var initCs, regCs []corev1.Container
		for i, name := range split(inits) {
			c := initC(name)
			c.RestartPolicy = policy(i)
			initCs = append(initCs, c)
		}
		for _, name := range split(regulars) {
			regCs = append(regCs, regular(name))
		}
		valid := true
		seen := map[string]bool{}
		for _, c := range append(slices.Clone(initCs), regCs...) {
			if c.Name == "" || seen[c.Name] {
				valid = false
			}
			seen[c.Name] = true
			if p := c.RestartPolicy; p != nil && *p != corev1.ContainerRestartPolicyAlways && *p != corev1.ContainerRestartPolicyOnFailure && *p != corev1.ContainerRestartPolicyNever {
				valid = false
			}
		}
		rt := &fakeRuntime{}
		nodes, err := podplan.Build(pod(initCs, regCs, ""), rt.funcs())
		if err != nil {
			var ce *podplan.ConfigError
			if valid || !errors.As(err, &ce) || !errors.Is(err, cs.ErrInvalidPlan) || !strings.HasPrefix(ce.Option, "pod.spec.") || ce.Reason == "" {
				t.Fatalf("Build(%q, %q) = %T %v; valid spec: %v", inits, regulars, err, err, valid)
			}
			return
		}
		if !valid {
			t.Fatalf("Build accepted inits %q, regulars %q, policies %q/%q", inits, regulars, firstPolicy, otherPolicy)
		}
		checkRun(t, nodes, rt)
		for name := range seen {
			if n := slices.Index(rt.log, "start:"+name); n < 0 {
				t.Fatalf("%s was not started: %v", name, rt.log)
			}
		}
	})
}
