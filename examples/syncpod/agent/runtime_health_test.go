package agent_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

// A frozen runtime is an unhealthy node, and Healthy names the runtime,
// not the PLEG, well before the PLEG's own threshold; the node is healthy
// again once the runtime answers. In both modes.
func TestFrozenRuntimeIsNamed(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			n := startSim(t, scenario.DefaultRuntime(testScale).Options()...)
			a := startAgent(t, n, agent.WithMode(mode), agent.WithTimeScale(testScale))
			waitFor(t, "healthy", func() bool { return a.Healthy() == nil })
			// 3 s is six times the scaled 10-s bound and far below the
			// scaled 3-min PLEG threshold (9 s).
			if err := n.rt.Stall(3 * time.Second); err != nil {
				t.Fatal(err)
			}
			var err error
			waitFor(t, "unhealthy during the freeze", func() bool { err = a.Healthy(); return err != nil })
			if !strings.Contains(err.Error(), "container runtime is not responding") || strings.Contains(err.Error(), "PLEG") {
				t.Errorf("Healthy of a frozen runtime: %v; want the runtime named, not the PLEG", err)
			}
			if s := a.Snapshot(); s.RuntimeHealthy || !strings.Contains(s.RuntimeMessage, "not responding") {
				t.Errorf("Snapshot of a frozen runtime: RuntimeHealthy %v %q", s.RuntimeHealthy, s.RuntimeMessage)
			}
			waitFor(t, "healthy after the freeze", func() bool { return a.Healthy() == nil })
			if s := a.Snapshot(); !s.RuntimeHealthy || s.RuntimeMessage != "" {
				t.Errorf("Snapshot after the freeze: RuntimeHealthy %v %q", s.RuntimeHealthy, s.RuntimeMessage)
			}
		})
	}
}

// A runtime whose Status fails (it answers nothing else either, here
// only Status) is reported down once the bound passes, with its error.
func TestRuntimeStatusFailing(t *testing.T) {
	n := startSim(t, scenario.DefaultRuntime(testScale).Options()...)
	a := startAgent(t, n, agent.WithMode(agent.ModeSyncPod), agent.WithTimeScale(testScale))
	waitFor(t, "healthy", func() bool { return a.Healthy() == nil })
	if err := n.rt.SetErrorRate("Status", 1, codes.Unavailable); err != nil {
		t.Fatal(err)
	}
	var err error
	waitFor(t, "unhealthy", func() bool { err = a.Healthy(); return err != nil })
	if !strings.Contains(err.Error(), "container runtime is not responding") || !strings.Contains(err.Error(), "Unavailable") {
		t.Errorf("Healthy with Status failing: %v", err)
	}
	if err := n.rt.SetErrorRate("Status", 0, codes.OK); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "healthy again", func() bool { return a.Healthy() == nil })
}

// A freeze longer than the PLEG's threshold leaves the PLEG unhealthy for
// a moment after the runtime answers again: its relists waited on the
// runtime. Healthy names the runtime through that moment too, never the
// PLEG alone. The relist after the thaw is held (HangNext), so the moment
// lasts until the test has looked.
func TestRecoveredRuntimeStillNamed(t *testing.T) {
	n := startSim(t, scenario.DefaultRuntime(testScale).Options()...)
	a := startAgent(t, n, agent.WithMode(agent.ModeBaseline), agent.WithTimeScale(testScale),
		agent.WithHealthThreshold(3*time.Second))
	waitFor(t, "healthy", func() bool { return a.Healthy() == nil })
	// The runtime is named within the scaled check period and bound (2 s),
	// before the PLEG's 3-s threshold, as at the kubelet's scale (40 s
	// against 3 min).
	if err := n.rt.Stall(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the PLEG unhealthy during the freeze", func() bool { ok, _, _ := a.PLEGHealth(); return !ok })
	if err := n.rt.HangNext("ListPodSandbox", 2); err != nil {
		t.Fatal(err)
	}
	var err error
	waitFor(t, "the runtime answering again, the PLEG not yet", func() bool {
		err = a.Healthy()
		if err != nil && !strings.Contains(err.Error(), "container runtime") {
			t.Fatalf("Healthy blames the PLEG alone around a freeze: %v", err)
		}
		return err != nil && strings.Contains(err.Error(), "answering again")
	})
	if !strings.Contains(err.Error(), "PLEG") {
		t.Errorf("Healthy after the thaw: %v; want the PLEG's state after the runtime's", err)
	}
	if s := a.Snapshot(); !s.RuntimeHealthy {
		t.Errorf("Snapshot after the thaw: RuntimeHealthy false (%q); the runtime answers", s.RuntimeMessage)
	}
}

// A sync that failed while the runtime was down is retried as soon as the
// runtime check sees it answer again, not after the sync's back-off: on
// a fake clock shared with the runtime, the sandbox is made within the
// check's retry period of the runtime's recovery, well inside the 10-s
// back-off. In both modes.
func TestRecoveredRuntimeRetriesFailedSyncs(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			f := startFakeNode(t, mode)
			for _, m := range []string{"Status", "RunPodSandbox"} {
				if err := f.n.rt.SetErrorRate(m, 1, codes.DeadlineExceeded); err != nil {
					t.Fatal(err)
				}
			}
			f.a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{
				Name: "p", Containers: []string{probeImage}, RestartPolicy: corev1.RestartPolicyAlways})})
			f.drive("the runtime named", func() bool {
				err := f.a.Healthy()
				return err != nil && strings.Contains(err.Error(), "container runtime is not responding")
			})
			// The runtime comes back right after a sandbox attempt failed:
			// that sync's back-off has all of its 10 s to run.
			tries := f.n.rt.Calls("RunPodSandbox")
			f.drive("another failed sandbox attempt", func() bool {
				return f.n.rt.Calls("RunPodSandbox") > tries && f.a.Quiescent()
			})
			back := f.clk.Now()
			for _, m := range []string{"Status", "RunPodSandbox"} {
				if err := f.n.rt.SetErrorRate(m, 0, codes.OK); err != nil {
					t.Fatal(err)
				}
			}
			f.drive("the sandbox", func() bool { return f.count(agent.EventSandbox, "") > 0 })
			e, _ := f.first(agent.EventSandbox, "", 0)
			if d := e.Time.Sub(back); d > agent.RuntimeRetryPeriod {
				t.Errorf("sandbox made %v after the runtime answered again, want within the runtime check's %v (the sync back-off is %v)",
					d, agent.RuntimeRetryPeriod, agent.SyncErrorBackoff)
			}
		})
	}
}
