package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

// A crashing container restarts at once, then after 10 s, 20 s, ... up to
// 5 min, on a fake clock shared by the agent and the simulated runtime.
func TestCrashLoopBackoffSequence(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
			n := startSim(t, crisim.WithClock(clk), crisim.WithImage("registry.sim/crash:1", 1))
			ev := &events{t: t}
			a := startAgent(t, n, agent.WithMode(mode), agent.WithClock(clk), agent.WithEventHook(ev.hook))
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{
				Name: "crash", Containers: []string{"registry.sim/crash:1"}, RestartPolicy: corev1.RestartPolicyAlways})})

			started := func(attempt uint32) func() bool {
				return func() bool {
					return len(ev.find(func(e agent.Event) bool { return e.Type == agent.EventStarted && e.Attempt == attempt })) > 0
				}
			}
			// Time moves only when the test steps it: 100 ms per poll while
			// waiting, so relists, back-off timers and requeues fire.
			tick := func(cond func() bool) func() bool {
				return func() bool {
					if cond() {
						return true
					}
					clk.Step(100 * time.Millisecond)
					return false
				}
			}
			startedAt := func(attempt uint32) time.Time {
				e := ev.find(func(e agent.Event) bool { return e.Type == agent.EventStarted && e.Attempt == attempt })
				return e[0].Time
			}
			crash := func(attempt uint32) time.Time {
				t.Helper()
				var id string
				waitFor(t, "running container", tick(func() bool {
					cs, err := n.client.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
						State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
					for _, c := range cs {
						if c.Metadata.Attempt == attempt {
							id = c.Id
						}
					}
					return err == nil && id != ""
				}))
				at := clk.Now()
				if err := n.rt.ExitContainer(id, 1); err != nil {
					t.Fatal(err)
				}
				return at
			}
			waitFor(t, "first start", tick(started(0)))
			var delays []time.Duration
			for attempt := uint32(0); attempt <= 7; attempt++ {
				crashed := crash(attempt)
				waitFor(t, fmt.Sprintf("restart %d", attempt+1), tick(started(attempt+1)))
				delays = append(delays, startedAt(attempt+1).Sub(crashed))
			}
			want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
				160 * time.Second, 300 * time.Second, 300 * time.Second}
			// Each restart waits its back-off, and happens within a few
			// ticks of it (the baseline also waits for a relist).
			slack := time.Second
			if mode == agent.ModeBaseline {
				slack = 5 * agent.RelistPeriod // each sync also waits for a relist newer than the last
			}
			for i := range want {
				if d := delays[i]; d < want[i] || d > want[i]+slack {
					t.Fatalf("restart delays = %v, want %v (+%v)", delays, want, slack)
				}
			}
			if bo := ev.find(func(e agent.Event) bool { return e.Type == agent.EventBackOff }); len(bo) == 0 {
				t.Error("no CrashLoopBackOff event")
			}
			waitFor(t, "8 restarts reported", tick(func() bool { return podState(a, "crash").Restarts == 8 }))
		})
	}
}
