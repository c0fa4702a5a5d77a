package crifilter_test

import (
	"fmt"

	"github.com/syncpod/syncpod/internal/crifilter"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func Example() {
	containers := []*runtimeapi.Container{
		{Id: "4f1c9a", PodSandboxId: "s1", State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{Id: "4f2b07", PodSandboxId: "s1", State: runtimeapi.ContainerState_CONTAINER_EXITED},
		{Id: "9d0e33", PodSandboxId: "s2", State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}
	list := func(f *runtimeapi.ContainerFilter) {
		id, ok := crifilter.ResolveID(f.GetId(), crifilter.IDs(containers))
		if !ok {
			fmt.Printf("%q: no match\n", f.GetId())
			return
		}
		for _, c := range containers {
			if crifilter.MatchContainer(f, id, f.GetPodSandboxId(), crifilter.ContainerOf(c)) {
				fmt.Printf("%q: %s\n", f.GetId(), c.GetId())
			}
		}
	}
	list(&runtimeapi.ContainerFilter{Id: "4f2"}) // a unique prefix
	list(&runtimeapi.ContainerFilter{Id: "4f"})  // an ambiguous prefix
	list(&runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	// Output:
	// "4f2": 4f2b07
	// "4f": no match
	// "": 4f1c9a
	// "": 9d0e33
}
