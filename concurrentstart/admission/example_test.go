package admission_test

import (
	"context"
	"fmt"

	"github.com/syncpod/syncpod/concurrentstart/admission"
)

// Two pods share a node-wide bound of one: the pod that arrived first gets
// all its work done first.
func Example() {
	ctl, err := admission.New(admission.WithLimiter(admission.Fixed(1)))
	if err != nil {
		panic(err)
	}
	defer ctl.Close()
	ctx := context.Background()
	for _, step := range []struct{ pod, work string }{
		{"pod-a", "sandbox"}, {"pod-a", "start app"}, {"pod-b", "sandbox"},
	} {
		g, err := ctl.Acquire(ctx, admission.Request{Pod: step.pod, Kind: step.work})
		if err != nil {
			panic(err)
		}
		fmt.Println(step.pod, step.work)
		g.Release(nil) // the runtime call's error
	}
	ctl.Forget("pod-a")
	ctl.Forget("pod-b")
	fmt.Println(ctl.Stats().Pods, "pods in line")
	// Output:
	// pod-a sandbox
	// pod-a start app
	// pod-b sandbox
	// 0 pods in line
}

// A node agent gives the AIMD the node's CPU time, so that its bound stops
// growing once the cores are busy; where /proc/stat cannot be read,
// latency alone sets it.
func ExampleNodeCPU() {
	cfg := admission.AIMDConfig{}
	if cpu, err := admission.NodeCPU(); err == nil {
		cfg.CPU = cpu
	}
	l, err := admission.NewAIMD(cfg)
	if err != nil {
		panic(err)
	}
	ctl, err := admission.New(admission.WithLimiter(l))
	if err != nil {
		panic(err)
	}
	defer ctl.Close()
	fmt.Println("first bound", ctl.Stats().Limit)
	// Output: first bound 6
}
