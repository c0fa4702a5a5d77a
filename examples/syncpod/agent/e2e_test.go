package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

const testScale = 0.05 // simulated latencies and kubelet periods, scaled down alike

// A small burst: pods with an init container, a sidecar and two containers
// reach Running in both modes, each container started exactly once, and
// syncpod mode starts the containers of a pod concurrently.
func TestBurstReachesRunning(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			rt := scenario.DefaultRuntime(testScale)
			rt.Images = scenario.Images("app", 3, 10e6)
			rt.Images = append(rt.Images, scenario.Image{Ref: "registry.sim/init:1", Size: 1e6})
			n := startSim(t, rt.Options()...)
			a := startAgent(t, n, agent.WithMode(mode), agent.WithTimeScale(testScale))
			const pods = 8
			for i := 0; i < pods; i++ {
				a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{
					Name: fmt.Sprintf("p%d", i), Init: []string{"registry.sim/init:1"}, InitRun: 20 * time.Millisecond,
					Sidecars: []string{rt.Images[0].Ref}, Containers: []string{rt.Images[1].Ref, rt.Images[2].Ref},
				})})
			}
			waitFor(t, "all pods running", allRunning(a, pods))
			if got := n.rt.Calls("CreateContainer"); got != pods*4 {
				t.Errorf("CreateContainer calls = %d, want %d (one per container)", got, pods*4)
			}
			if got := n.rt.Calls("RunPodSandbox"); got != pods {
				t.Errorf("RunPodSandbox calls = %d, want %d", got, pods)
			}
			for _, img := range rt.Images {
				if d := n.rt.Downloads(img.Ref); d != 1 {
					t.Errorf("%s downloaded %d times, want once", img.Ref, d)
				}
			}
			st := a.Stats()
			if mode == agent.ModeBaseline && st.WorkerBlocked == 0 {
				t.Error("baseline workers never blocked")
			}
			if mode == agent.ModeSyncPod && st.WorkerBlocked != 0 {
				t.Errorf("syncpod workers blocked for %v", st.WorkerBlocked)
			}
		})
	}
}

// Small pods do not wait for a pod whose image is huge: they are all running
// while its download is still going.
func TestBigImageDoesNotHoldSmallPods(t *testing.T) {
	rt := scenario.DefaultRuntime(testScale)
	rt.Images = []scenario.Image{{Ref: "registry.sim/small:1", Size: 1e6}, {Ref: "registry.sim/huge:1", Size: 1e12}}
	n := startSim(t, rt.Options()...)
	a := startAgent(t, n, agent.WithTimeScale(testScale))
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{Name: "big", Containers: []string{"registry.sim/huge:1"}})})
	for i := 0; i < 5; i++ {
		a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{Name: fmt.Sprintf("small-%d", i), Containers: []string{"registry.sim/small:1"}})})
	}
	waitFor(t, "small pods running", func() bool {
		for i := 0; i < 5; i++ {
			if p := podState(a, fmt.Sprintf("small-%d", i)); p.State != agent.PodRunning {
				return false
			}
		}
		return true
	})
	if p := podState(a, "big"); p.State != agent.PodPending {
		t.Errorf("big pod is %s, want Pending while its image downloads", p.State)
	}
	if s := a.Snapshot(); s.PullsInFlight != 1 {
		t.Errorf("pulls in flight = %d, want 1 (the huge image)", s.PullsInFlight)
	}
}

// A runtime stall mid-burst: the PLEG reports unhealthy during it, healthy
// again after it, and every pod still starts.
func TestStallIsReportedAndRecovered(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			rt := scenario.DefaultRuntime(testScale)
			rt.Images = scenario.Images("app", 2, 1e6)
			n := startSim(t, rt.Options()...)
			ev := &events{}
			a := startAgent(t, n, agent.WithMode(mode), agent.WithTimeScale(testScale),
				agent.WithHealthThreshold(200*time.Millisecond), agent.WithEventHook(ev.hook))
			waitFor(t, "PLEG healthy", func() bool { return a.Snapshot().PLEGHealthy })
			for i := 0; i < 6; i++ {
				a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{
					Name: fmt.Sprintf("p%d", i), Containers: []string{rt.Images[i%2].Ref}})})
			}
			n.rt.Stall(2 * time.Second) // ten times the health threshold
			waitFor(t, "all pods running", allRunning(a, 6))
			// Reported: unhealthy (with a reason) during the stall, then healthy.
			var unhealthy *agent.Event
			waitFor(t, "unhealthy, then healthy again", func() bool {
				unhealthy = nil
				for _, e := range ev.find(func(e agent.Event) bool { return e.Type == agent.EventHealth }) {
					if !e.Healthy && unhealthy == nil {
						unhealthy = &e
					}
					if e.Healthy && unhealthy != nil {
						return true
					}
				}
				return false
			})
			if unhealthy.Err == nil {
				t.Error("the unhealthy report carries no reason")
			}
			if a.Stats().PLEGUnhealthy == 0 {
				t.Error("no unhealthy time recorded")
			}
		})
	}
}

// Pods created and deleted continuously: afterwards there are no workers,
// no per-pod entries and no sandboxes left (goroutines are checked by
// goleak in TestMain).
func TestChurnLeavesNothingBehind(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			rt := scenario.DefaultRuntime(testScale)
			rt.Images = scenario.Images("app", 2, 1e6)
			n := startSim(t, rt.Options()...)
			a := startAgent(t, n, agent.WithMode(mode), agent.WithTimeScale(testScale))
			var live []agent.PodUpdate
			for i := 0; i < 30; i++ {
				p := scenario.Pod(scenario.PodOptions{Name: fmt.Sprintf("c%d", i), Sidecars: []string{rt.Images[0].Ref},
					Containers: []string{rt.Images[1].Ref}})
				a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: p})
				live = append(live, agent.PodUpdate{Op: agent.OpDelete, Pod: p})
				if i%3 == 2 { // delete some while they start, some once running
					a.Apply(live[0])
					live = live[1:]
				}
				time.Sleep(2 * time.Millisecond)
			}
			for _, u := range live {
				a.Apply(u)
			}
			waitFor(t, "every worker and entry gone", func() bool {
				st := a.Stats()
				return st.Workers == 0 && st.CacheEntries == 0
			})
			sbs, err := n.client.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{})
			if err != nil || len(sbs) != 0 {
				t.Fatalf("sandboxes left: %d (%v)", len(sbs), err)
			}
			if s := a.Snapshot(); s.Total != 0 {
				t.Errorf("%d pods still reported", s.Total)
			}
		})
	}
}

// Stop with syncs and pulls in flight (a hung pull, a hung start) returns,
// and no goroutine is left (goleak).
func TestShutdownWithWorkInFlight(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			rt := scenario.DefaultRuntime(testScale)
			rt.Images = scenario.Images("app", 3, 1e6)
			n := startSim(t, rt.Options()...)
			n.rt.HangNext("PullImage", 1)
			n.rt.HangNext("StartContainer", 2)
			a, err := agent.New(n.client.CRI(), n.client.CRI(), agent.WithMode(mode), agent.WithTimeScale(testScale))
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 6; i++ {
				a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{
					Name: fmt.Sprintf("p%d", i), Containers: []string{rt.Images[i%3].Ref}})})
			}
			waitFor(t, "a hung call in flight", func() bool {
				return n.rt.InFlight("PullImage") > 0 || n.rt.InFlight("StartContainer") > 0
			})
			a.Stop()
			a.Stop() // idempotent
			if a.Stats().Workers != 0 {
				t.Errorf("%d workers after Stop", a.Stats().Workers)
			}
			if err := a.Cleanup(context.Background()); err != nil {
				t.Errorf("Cleanup: %v", err)
			}
			if sbs, _ := n.client.ListPodSandbox(context.Background(), nil); len(sbs) != 0 {
				t.Errorf("%d sandboxes after Cleanup", len(sbs))
			}
		})
	}
}

var _ = crisim.AnnotationExitAfter

// A pod deleted and added again before its kill finished (a manifest
// renamed, say) comes back: new sandbox, running, reported afresh.
func TestDeleteThenReAdd(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			rt := scenario.DefaultRuntime(testScale)
			rt.Images = scenario.Images("app", 1, 1e6)
			n := startSim(t, rt.Options()...)
			ev := &events{}
			a := startAgent(t, n, agent.WithMode(mode), agent.WithTimeScale(testScale), agent.WithEventHook(ev.hook))
			p := scenario.Pod(scenario.PodOptions{Name: "again", Containers: []string{rt.Images[0].Ref}})
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: p})
			waitFor(t, "running", allRunning(a, 1))
			a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: p})
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: p})
			waitFor(t, "killed once and running again", func() bool {
				return len(ev.find(func(e agent.Event) bool { return e.Type == agent.EventKilled })) == 1 &&
					len(ev.find(func(e agent.Event) bool { return e.Type == agent.EventRunning })) == 2
			})
			sbs, err := n.client.ListPodSandbox(context.Background(), nil)
			if err != nil || len(sbs) != 1 {
				t.Fatalf("%d sandboxes (%v), want the new one only", len(sbs), err)
			}
		})
	}
}

// Events the runtime never delivers (containerd's per-subscriber buffer
// overflowing) do not strand a pod: the worker's unmet expectations make it
// ask the PLEG for a relist of that pod.
func TestLostEventsDoNotStrandPods(t *testing.T) {
	rt := scenario.DefaultRuntime(testScale)
	rt.Images = scenario.Images("app", 2, 1e6)
	n := startSim(t, rt.Options()...)
	a := startAgent(t, n, agent.WithTimeScale(testScale))
	waitFor(t, "PLEG evented", func() bool { return a.Snapshot().PLEGMode == "evented" })
	n.rt.DropNextEvents(1000)
	for i := 0; i < 4; i++ {
		a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{
			Name: fmt.Sprintf("p%d", i), Init: []string{rt.Images[0].Ref}, InitRun: 10 * time.Millisecond,
			Containers: []string{rt.Images[1].Ref}})})
	}
	waitFor(t, "all pods running without events", allRunning(a, 4))
	if got := n.rt.Calls("CreateContainer"); got != 8 {
		t.Errorf("CreateContainer calls = %d, want 8: nothing started twice", got)
	}
	if a.Stats().PLEG.PodRelists == 0 {
		t.Error("no pod relist was asked for")
	}
}
