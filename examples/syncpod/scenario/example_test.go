package scenario_test

import (
	"fmt"
	"time"

	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

// ExamplePod builds a pod with one init container, one sidecar and two
// regular containers, the shape of the burst scenario.
func ExamplePod() {
	pod := scenario.Pod(scenario.PodOptions{
		Name:       "web-0",
		Init:       []string{"registry.sim/init-db:1"},
		InitRun:    200 * time.Millisecond,
		Sidecars:   []string{"registry.sim/log-agent:1"},
		Containers: []string{"registry.sim/web-0:1", "registry.sim/web-1:1"},
	})
	for _, c := range pod.Spec.InitContainers {
		fmt.Println("init:", c.Name, c.Image, c.RestartPolicy != nil)
	}
	for _, c := range pod.Spec.Containers {
		fmt.Println("container:", c.Name, c.Image)
	}
	// Output:
	// init: init-0 registry.sim/init-db:1 false
	// init: sidecar-0 registry.sim/log-agent:1 true
	// container: app-0 registry.sim/web-0:1
	// container: app-1 registry.sim/web-1:1
}
