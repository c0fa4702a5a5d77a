package agent_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

func runThreePods(t *testing.T) (*simNode, *agent.Agent) {
	t.Helper()
	n := startSim(t, crisim.WithImage("registry.sim/app:1", 1))
	a := startAgent(t, n)
	for _, name := range []string{"c", "a", "b"} {
		a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{
			Name: name, Containers: []string{"registry.sim/app:1"}})})
	}
	waitFor(t, "three pods running", allRunning(a, 3))
	a.Stop()
	return n, a
}

func sandboxesLeft(t *testing.T, n *simNode) int {
	t.Helper()
	sbs, err := n.client.ListPodSandbox(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return len(sbs)
}

// A runtime that fails some calls (a loaded containerd timing
// StopPodSandbox or RemovePodSandbox out) does not leave pods behind:
// Cleanup passes again until everything is gone.
func TestCleanupRetriesFailedCalls(t *testing.T) {
	n, a := runThreePods(t)
	n.rt.FailNext("StopPodSandbox", 2, nil)
	n.rt.FailNext("RemovePodSandbox", 4, nil) // the sandboxes outlive the first pass
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Cleanup(ctx); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if left := sandboxesLeft(t, n); left != 0 {
		t.Fatalf("%d sandboxes left after Cleanup", left)
	}
}

// When the deadline passes first, Cleanup says which pods remain and why;
// a later Cleanup, once the runtime answers, removes them.
func TestCleanupDeadlineNamesRemainingPods(t *testing.T) {
	n, a := runThreePods(t)
	n.rt.SetErrorRate("StopPodSandbox", 1, codes.DeadlineExceeded)
	n.rt.SetErrorRate("RemovePodSandbox", 1, codes.DeadlineExceeded)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := a.Cleanup(ctx)
	var ce *agent.CleanupError
	if !errors.As(err, &ce) {
		t.Fatalf("Cleanup = %v, want a *CleanupError", err)
	}
	if want := []string{"default/a", "default/b", "default/c"}; !slices.Equal(ce.Remaining, want) {
		t.Fatalf("Remaining = %v, want %v", ce.Remaining, want)
	}
	if ce.Err == nil {
		t.Fatal("CleanupError.Err is nil, want the last failure")
	}
	if left := sandboxesLeft(t, n); left != 3 {
		t.Fatalf("%d sandboxes on the runtime, want the 3 Cleanup reported", left)
	}
	n.rt.SetErrorRate("StopPodSandbox", 0, codes.OK)
	n.rt.SetErrorRate("RemovePodSandbox", 0, codes.OK)
	if err := a.Cleanup(context.Background()); err != nil {
		t.Fatalf("second Cleanup: %v", err)
	}
	if left := sandboxesLeft(t, n); left != 0 {
		t.Fatalf("%d sandboxes left after the second Cleanup", left)
	}
}

func TestCleanupNilContext(t *testing.T) {
	n := startSim(t)
	a := startAgent(t, n)
	a.Stop()
	//lint:ignore SA1012 a nil ctx is the misuse under test
	if err := a.Cleanup(nil); err == nil { //nolint:staticcheck
		t.Fatal("Cleanup(nil) = nil, want an error")
	}
}
