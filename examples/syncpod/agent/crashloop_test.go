package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

// A crashing container restarts at once, then after 10 s, 20 s, ... up to
// 5 min, on a fake clock shared by the agent and the simulated runtime.
//
// Time moves only when the test steps it, and only while the agent is
// quiescent (no wake, relist or event in hand) and the runtime has no call
// in flight; then it moves exactly to the next timer deadline. So time
// never passes under work that would have acted sooner, and every delay
// below is a fake-time fact, whatever the machine's load.
func TestCrashLoopBackoffSequence(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			clk := newDeadlineClock(time.Unix(1_700_000_000, 0))
			n := startSim(t, crisim.WithClock(clk), crisim.WithImage("registry.sim/crash:1", 1))
			ev := &events{t: t}
			// Health sampling plays no part here; at its default 20 ms
			// period it would only multiply the steps.
			a := startAgent(t, n, agent.WithMode(mode), agent.WithClock(clk), agent.WithEventHook(ev.hook),
				agent.WithHealthSampling(time.Hour))
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{
				Name: "crash", Containers: []string{"registry.sim/crash:1"}, RestartPolicy: corev1.RestartPolicyAlways})})

			// drive waits for cond, stepping the clock to its next
			// deadline whenever everything is idle.
			drive := func(what string, cond func() bool) {
				t.Helper()
				deadline := time.Now().Add(90 * time.Second) // turns a hang into a failure
				for !cond() {
					if time.Now().After(deadline) {
						t.Fatalf("timed out waiting for %s (fake time %v)", what, clk.Now())
					}
					if steppable(a, n.rt) {
						clk.stepToNext()
						continue
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
			started := func(attempt uint32) func() bool {
				return func() bool {
					return len(ev.find(func(e agent.Event) bool { return e.Type == agent.EventStarted && e.Attempt == attempt })) > 0
				}
			}
			startedAt := func(attempt uint32) time.Time {
				e := ev.find(func(e agent.Event) bool { return e.Type == agent.EventStarted && e.Attempt == attempt })
				return e[0].Time
			}
			crash := func(attempt uint32) time.Time {
				t.Helper()
				var id string
				drive("running container", func() bool {
					cs, err := n.client.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
						State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
					for _, c := range cs {
						if c.Metadata.Attempt == attempt {
							id = c.Id
						}
					}
					return err == nil && id != ""
				})
				before := len(ev.find(func(agent.Event) bool { return true }))
				at := clk.Now()
				if err := n.rt.ExitContainer(id, 1); err != nil {
					t.Fatal(err)
				}
				// The agent's reaction to the exit: the restart, or the
				// back-off it now waits out.
				reacted := func() bool {
					all := ev.find(func(agent.Event) bool { return true })
					for _, e := range all[before:] {
						if (e.Type == agent.EventStarted && e.Attempt == attempt+1) || e.Type == agent.EventBackOff {
							return true
						}
					}
					return false
				}
				if mode == agent.ModeSyncPod {
					// The exit arrives as a runtime event: the agent reacts
					// without time passing. Waiting for that before stepping
					// keeps an event still on the wire from being overtaken
					// by a step (the PLEG's goroutines are not in Quiescent).
					waitFor(t, fmt.Sprintf("reaction to crash %d", attempt), reacted)
				} else {
					drive(fmt.Sprintf("reaction to crash %d", attempt), reacted) // the next relist sees it
				}
				return at
			}
			drive("first start", started(0))
			var delays []time.Duration
			for attempt := uint32(0); attempt <= 7; attempt++ {
				crashed := crash(attempt)
				drive(fmt.Sprintf("restart %d", attempt+1), started(attempt+1))
				delays = append(delays, startedAt(attempt+1).Sub(crashed))
			}
			want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
				160 * time.Second, 300 * time.Second, 300 * time.Second}
			// syncpod restarts exactly when the back-off ends: the exit
			// event arrives at once and the back-off timer wakes the
			// worker at its end. The baseline first has to see the exit in
			// a relist, at most one relist period later.
			slack := time.Duration(0)
			if mode == agent.ModeBaseline {
				slack = agent.RelistPeriod
			}
			for i := range want {
				if d := delays[i]; d < want[i] || d > want[i]+slack {
					t.Fatalf("restart delays = %v, want %v (+%v)", delays, want, slack)
				}
			}
			t.Logf("restart delays (fake time) = %v", delays)
			if bo := ev.find(func(e agent.Event) bool { return e.Type == agent.EventBackOff }); len(bo) == 0 {
				t.Error("no CrashLoopBackOff event")
			}
			drive("8 restarts reported", func() bool { return podState(a, "crash").Restarts == 8 })
		})
	}
}

// steppable reports whether a fake-clock test may step time: the agent is
// quiescent, no unary call is inside the runtime, and every event the
// runtime sent has reached the agent's PLEG (one on the wire is in
// neither of the other two, and a step would overtake it).
func steppable(a *agent.Agent, rt *crisim.Runtime) bool {
	return rt.EventsSent() == int64(a.Stats().PLEG.RuntimeEvents) && a.Quiescent() && runtimeIdle(rt)
}

// runtimeIdle reports whether no unary CRI call is inside the simulated
// runtime (event streams stay open and do not count).
func runtimeIdle(rt *crisim.Runtime) bool {
	for _, m := range crisim.Methods() {
		if m != "GetContainerEvents" && rt.InFlight(m) > 0 {
			return false
		}
	}
	return true
}
