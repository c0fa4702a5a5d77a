package podplan_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/syncpod/syncpod/concurrentstart"
	"github.com/syncpod/syncpod/concurrentstart/podplan"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod with an init container, a sidecar with a startup probe and three
// regular containers, one of which starts after another.
func Example() {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
			podplan.AnnotationStartAfter: `{"app": ["cache:started"]}`,
		}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "migrate", Image: "migrate:1"},
				{Name: "proxy", Image: "envoy:1", RestartPolicy: &always, StartupProbe: &corev1.Probe{}},
			},
			Containers: []corev1.Container{
				{Name: "app", Image: "app:1"}, {Name: "cache", Image: "redis:7"}, {Name: "metrics", Image: "prom:1"},
			},
		},
	}
	nodes, err := podplan.Build(pod, podplan.Funcs{
		Start:         func(ctx context.Context, c podplan.Container) error { return nil }, // CreateContainer + StartContainer
		WaitCompleted: func(ctx context.Context, c podplan.Container) error { return nil }, // exited 0
		WaitStartup:   func(ctx context.Context, c podplan.Container) error { return nil }, // startup probe passed
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range nodes {
		var deps []string
		for _, d := range n.DependsOn {
			deps = append(deps, d.String())
		}
		fmt.Printf("%s after [%s]\n", n.Name, strings.Join(deps, " "))
	}
	plan, _ := concurrentstart.New(nodes, concurrentstart.WithMaxParallel(8))
	report, err := plan.Run(context.Background())
	fmt.Println("succeeded:", report.Count(concurrentstart.Succeeded), "error:", err)
	// Output:
	// migrate after []
	// proxy after [migrate:completed]
	// app after [proxy:ready cache:started]
	// cache after [proxy:ready]
	// metrics after [proxy:ready]
	// succeeded: 5 error: <nil>
}

// Planning the rest of a partly started pod: the init container is done and
// the sidecar runs, so only the regular containers are left, with no edges.
func Example_partlyRunning() {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "migrate"}, {Name: "proxy", RestartPolicy: &always}},
		Containers:     []corev1.Container{{Name: "app"}, {Name: "metrics"}},
	}}
	nodes, err := podplan.Build(pod,
		podplan.Funcs{Start: func(context.Context, podplan.Container) error { return nil }},
		podplan.WithCompleted("migrate"), podplan.WithRunning("proxy", "metrics"))
	for _, n := range nodes {
		fmt.Println(n.Name, len(n.DependsOn))
	}
	fmt.Println(err)
	// Output:
	// app 0
	// <nil>
}
