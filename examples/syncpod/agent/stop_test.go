package agent_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

// A second Stop, called while the first is still waiting for a worker,
// returns only after everything has stopped, like the first.
func TestConcurrentStopsAllWait(t *testing.T) {
	n := startSim(t, crisim.WithImage("registry.sim/app:1", 1))
	release := make(chan struct{})
	var hookReturned atomic.Bool
	var blockOnce sync.Once
	blocking := make(chan struct{})
	hook := func(e agent.Event) {
		if e.Type != agent.EventStarted {
			return
		}
		blockOnce.Do(func() {
			// Hold the pod's worker inside its sync: Stop must wait for it.
			close(blocking)
			<-release
			hookReturned.Store(true)
		})
	}
	a, err := agent.New(n.client.CRI(), n.client.CRI(), agent.WithEventHook(hook))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: scenario.Pod(scenario.PodOptions{Name: "p", Containers: []string{"registry.sim/app:1"}})})
	<-blocking

	first := make(chan struct{})
	go func() {
		defer close(first)
		a.Stop()
	}()
	waitFor(t, "first Stop to begin", func() bool { return errors.Is(a.Start(), agent.ErrStopped) })
	// Let the worker go a little later; the second Stop must not return
	// before then.
	go func() {
		time.Sleep(20 * time.Millisecond)
		close(release)
	}()
	a.Stop()
	if !hookReturned.Load() {
		t.Fatal("second Stop returned while a worker was still running")
	}
	<-first
	a.Stop() // and a third, after the fact, returns at once
}
