package agent_test

import (
	"context"
	"sync"
	"testing"

	cri "k8s.io/cri-api/pkg/apis"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

// stopRecorder records each StopContainer call: the container's name and
// the timeout it was given.
type stopRecorder struct {
	cri.RuntimeService
	mu    sync.Mutex
	stops []stopCall
}

type stopCall struct {
	name    string
	timeout int64
}

func (r *stopRecorder) StopContainer(ctx context.Context, id string, timeout int64) error {
	name := id
	if st, err := r.ContainerStatus(ctx, id, false); err == nil {
		name = st.GetStatus().GetMetadata().GetName()
	}
	r.mu.Lock()
	r.stops = append(r.stops, stopCall{name, timeout})
	r.mu.Unlock()
	return r.RuntimeService.StopContainer(ctx, id, timeout)
}

func (r *stopRecorder) calls() []stopCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]stopCall(nil), r.stops...)
}

// A deleted pod stops as the kubelet stops it: its regular containers
// first, given the pod's grace period, then its sidecars in reverse start
// order; a deletion's shorter grace period wins over the spec's.
func TestKillStopsGracefullyInOrder(t *testing.T) {
	for _, tc := range []struct {
		name                string
		spec, deletion      int64 // grace periods in seconds; deletion 0: none set
		wantFirst, wantLast int64 // the timeout given to the regular containers, and the floor for sidecars
	}{
		{name: "spec grace period", spec: 20, wantFirst: 20, wantLast: 2},
		{name: "deletion shortens it", spec: 20, deletion: 5, wantFirst: 5, wantLast: 2},
		{name: "zero still gets the 2 s minimum", spec: 0, wantFirst: 2, wantLast: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startSim(t, crisim.WithImage("registry.sim/app:1", 1))
			rec := &stopRecorder{RuntimeService: n.client.CRI()}
			a, err := agent.New(rec, n.client.CRI())
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
			defer a.Stop()
			img := "registry.sim/app:1"
			pod := scenario.Pod(scenario.PodOptions{Name: "web", Sidecars: []string{img, img}, Containers: []string{img, img}})
			pod.Spec.TerminationGracePeriodSeconds = &tc.spec
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
			waitFor(t, "the pod running", allRunning(a, 1))
			del := pod.DeepCopy()
			if tc.deletion > 0 {
				del.DeletionGracePeriodSeconds = &tc.deletion
			}
			a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: del})
			waitFor(t, "four stops", func() bool { return len(rec.calls()) >= 4 })
			waitFor(t, "the pod gone", func() bool { return a.Snapshot().Total == 0 })
			calls := rec.calls()
			if len(calls) != 4 {
				t.Fatalf("StopContainer calls %v, want one per container", calls)
			}
			regular := map[string]bool{calls[0].name: true, calls[1].name: true}
			if !regular["app-0"] || !regular["app-1"] {
				t.Fatalf("first stops %v, want the regular containers app-0 and app-1", calls[:2])
			}
			if calls[2].name != "sidecar-1" || calls[3].name != "sidecar-0" {
				t.Fatalf("last stops %v, want sidecar-1 then sidecar-0 (reverse start order)", calls[2:])
			}
			for _, c := range calls[:2] {
				if c.timeout < tc.wantFirst-1 || c.timeout > tc.wantFirst {
					t.Errorf("%s stopped with timeout %d s, want %d", c.name, c.timeout, tc.wantFirst)
				}
			}
			for _, c := range calls[2:] {
				if c.timeout < tc.wantLast || c.timeout > tc.wantFirst {
					t.Errorf("%s stopped with timeout %d s, want what is left of %d, at least %d", c.name, c.timeout, tc.wantFirst, tc.wantLast)
				}
			}
		})
	}
}
