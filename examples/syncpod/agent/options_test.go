package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/manifest"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

// The narrowing options still run every pod: one pull and one start at a
// time, a safety relist an hour apart (events alone drive the PLEG).
func TestNarrowOptionsStillRunPods(t *testing.T) {
	rt := scenario.DefaultRuntime(testScale)
	rt.Images = scenario.Images("app", 2, 1e6)
	n := startSim(t, rt.Options()...)
	a := startAgent(t, n, agent.WithTimeScale(testScale), agent.WithPullParallelism(1),
		agent.WithStartParallelism(1), agent.WithSafetyRelist(time.Hour))
	if a.Mode() != agent.ModeSyncPod {
		t.Fatalf("Mode() = %s, want the default syncpod", a.Mode())
	}
	for i, name := range []string{"a", "b", "c"} {
		a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{
			Name: name, Containers: []string{rt.Images[i%2].Ref, rt.Images[(i+1)%2].Ref}})})
	}
	waitFor(t, "three pods running", allRunning(a, 3))
}

// A manifest change is applied once the debounce has passed on the
// manifest clock, not before.
func TestManifestClockDebounces(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(manifestV1), 0o644); err != nil {
		t.Fatal(err)
	}
	var applied atomic.Int32
	src := manifest.NewDir(dir, func(agent.PodUpdate) { applied.Add(1) },
		manifest.WithDebounce(time.Second), manifest.WithClock(clk))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitFor(t, "the first read applied", func() bool { return applied.Load() > 0 })
	first := applied.Load()
	late := "metadata: {name: late}\nspec: {containers: [{name: a, image: app:1}]}\n"
	if err := os.WriteFile(filepath.Join(dir, "late.yaml"), []byte(late), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "debounce timer armed", clk.HasWaiters)
	if applied.Load() != first {
		t.Fatalf("%d updates applied before the debounce passed", applied.Load()-first)
	}
	// The write may reach the watcher as several events (create, then
	// write), each re-arming the timer: step past every armed debounce
	// until the re-read happens.
	waitFor(t, "the change applied", func() bool {
		if clk.HasWaiters() {
			clk.Step(time.Second)
		}
		return applied.Load() > first
	})
}
