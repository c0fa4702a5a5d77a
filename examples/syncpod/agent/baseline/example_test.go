package baseline_test

import (
	"context"
	"fmt"
	"time"

	"github.com/syncpod/syncpod/examples/syncpod/agent/baseline"
)

// printPod prints each step a baseline sync takes.
type printPod struct{ plan baseline.Plan }

func (p printPod) WaitStatus(context.Context, time.Time) error {
	fmt.Println("wait for a newer status")
	return nil
}
func (p printPod) Plan(context.Context) (baseline.Plan, bool, error) { return p.plan, false, nil }
func (p printPod) CreateSandbox(context.Context) error               { fmt.Println("sandbox"); return nil }
func (p printPod) Kill(context.Context) error                        { return nil }
func (p printPod) Pull(_ context.Context, s baseline.Step) error {
	fmt.Println("pull", s.Index)
	return nil
}
func (p printPod) Start(_ context.Context, s baseline.Step) error {
	fmt.Println("start", s.Index)
	return nil
}
func (p printPod) Done(context.Context, error) time.Duration { return time.Minute }

// A new pod with two containers: the sandbox, then each container pulled
// and started in turn, as today's kubelet does.
func Example() {
	s := baseline.New(nil)
	requeue, err := s.Sync(context.Background(), "uid-1", printPod{plan: baseline.Plan{CreateSandbox: true, Start: 2}})
	fmt.Println(requeue, err)
	// Output:
	// wait for a newer status
	// sandbox
	// pull 0
	// start 0
	// pull 1
	// start 1
	// 1m0s <nil>
}
