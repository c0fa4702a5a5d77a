package agent_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

// runtimeIDs is every sandbox and container ID on the runtime, sorted.
func runtimeIDs(t *testing.T, n *simNode) []string {
	t.Helper()
	ctx := context.Background()
	sbs, err := n.client.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := n.client.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range sbs {
		ids = append(ids, "sandbox "+s.Id+" "+s.State.String())
	}
	for _, c := range cs {
		ids = append(ids, "container "+c.Id+" "+c.State.String())
	}
	slices.Sort(ids)
	return ids
}

// A new agent on a runtime whose pods an earlier agent left running (it
// was killed, not stopped cleanly) adopts them: no container is
// restarted, no sandbox is added, and each pod is reported running and
// adopted.
func TestAdoptsRunningPods(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			img := "registry.sim/app:1"
			n := startSim(t, crisim.WithImage(img, 1))
			pods := []string{"a", "b"}
			apply := func(a *agent.Agent) {
				for _, name := range pods {
					a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{
						Name: name, Sidecars: []string{img}, Containers: []string{img, img}})})
				}
			}
			first := startAgent(t, n, agent.WithMode(mode))
			apply(first)
			waitFor(t, "two pods running", allRunning(first, 2))
			for _, p := range first.Snapshot().Pods {
				if p.Adopted || p.Startup <= 0 {
					t.Errorf("pod %s of the first agent: adopted %v, startup %v; want started by it, with a startup", p.Name, p.Adopted, p.Startup)
				}
			}
			first.Stop() // what the runtime sees of a SIGKILL: the pods stay
			before := runtimeIDs(t, n)

			second := startAgent(t, n, agent.WithMode(mode))
			apply(second)
			waitFor(t, "two pods running again", allRunning(second, 2))
			for _, p := range second.Snapshot().Pods {
				if p.Restarts != 0 {
					t.Errorf("pod %s: %d restarts after adoption, want 0", p.Name, p.Restarts)
				}
				if !p.Adopted || p.Startup != 0 || p.StartedAt.IsZero() {
					t.Errorf("pod %s after adoption: adopted %v, startup %v, started at %v; want adopted, no startup of its own, the sandbox's start",
						p.Name, p.Adopted, p.Startup, p.StartedAt)
				}
			}
			if after := runtimeIDs(t, n); !slices.Equal(before, after) {
				t.Fatalf("runtime changed by the adoption:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// A pod whose manifest vanished while the agent was down is removed by
// RemoveOrphans once the new agent has its pods; the pods asked for stay.
func TestRemoveOrphansAfterRestart(t *testing.T) {
	img := "registry.sim/app:1"
	n := startSim(t, crisim.WithImage(img, 1))
	first := startAgent(t, n)
	for _, name := range []string{"kept", "gone"} {
		first.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{Name: name, Containers: []string{img}})})
	}
	waitFor(t, "two pods running", allRunning(first, 2))
	first.Stop()

	second := startAgent(t, n)
	second.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{Name: "kept", Containers: []string{img}})})
	removed, err := second.RemoveOrphans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"default/gone"}) {
		t.Fatalf("RemoveOrphans removed %v, want [default/gone]", removed)
	}
	waitFor(t, "the kept pod running", allRunning(second, 1))
	sbs, err := n.client.ListPodSandbox(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 1 || sbs[0].Metadata.Name != "kept" {
		t.Fatalf("sandboxes after RemoveOrphans: %v, want only kept's", sbs)
	}
	if again, err := second.RemoveOrphans(context.Background()); err != nil || len(again) != 0 {
		t.Fatalf("a second RemoveOrphans = %v, %v; want nothing to remove", again, err)
	}
}

// A runtime holding a stale duplicate of a pod (a second ready sandbox,
// left by a crash between creating it and recording it) is cleaned up by
// the adopting agent: one ready sandbox remains and the pod runs.
func TestAdoptionRemovesStaleDuplicateSandbox(t *testing.T) {
	img := "registry.sim/app:1"
	n := startSim(t, crisim.WithImage(img, 1))
	pod := func() *corev1.Pod { return scenario.Pod(scenario.PodOptions{Name: "web", Containers: []string{img}}) }
	first := startAgent(t, n)
	first.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod()})
	waitFor(t, "the pod running", allRunning(first, 1))
	first.Stop()
	p := pod()
	p.UID = agent.StaticPodUID(p)
	if _, err := n.client.RunPodSandbox(context.Background(), agent.SandboxConfig(p, 1), ""); err != nil {
		t.Fatal(err)
	}

	second := startAgent(t, n)
	second.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod()})
	waitFor(t, "one ready sandbox and the pod running", func() bool {
		sbs, err := n.client.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
			State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
		return err == nil && len(sbs) == 1 && allRunning(second, 1)()
	})
}
