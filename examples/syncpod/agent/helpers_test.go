package agent_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

// events records the agent's events for assertions.
type events struct {
	t   *testing.T // logs every event when set
	mu  sync.Mutex
	all []agent.Event
}

func (e *events) hook(ev agent.Event) {
	if e.t != nil && ev.Type != agent.EventSynced {
		e.t.Logf("%s %s %s/%d %v %v", ev.Type, ev.Pod, ev.Container, ev.Attempt, ev.Duration, ev.Err)
	}
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) find(f func(agent.Event) bool) []agent.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []agent.Event
	for _, ev := range e.all {
		if f(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor polls cond until it holds. The deadline only turns a hang into a
// failure; nothing is asserted about how long it took.
// waitLimit turns a hang into a failure.
var waitLimit = 90 * time.Second

// A describe function, when given, says what was seen instead.
func waitFor(t *testing.T, what string, cond func() bool, describe ...func() string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			for _, d := range describe {
				t.Logf("%s: %s", what, d())
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type simNode struct {
	srv    *crisim.Server
	rt     *crisim.Runtime
	client *criclient.Client
}

func startSim(t *testing.T, opts ...crisim.Option) *simNode {
	t.Helper()
	srv, err := crisim.Start(opts...)
	if err != nil {
		t.Fatalf("crisim.Start: %v", err)
	}
	c, err := criclient.Dial(context.Background(), srv.Endpoint())
	if err != nil {
		srv.Close()
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return &simNode{srv: srv, rt: srv.Runtime(), client: c}
}

func startAgent(t *testing.T, n *simNode, opts ...agent.Option) *agent.Agent {
	t.Helper()
	a, err := agent.New(n.client.CRI(), n.client.CRI(), opts...)
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	if err := a.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(a.Stop)
	return a
}

func podState(a *agent.Agent, name string) agent.PodReport {
	for _, p := range a.Snapshot().Pods {
		if p.Name == name {
			return p
		}
	}
	return agent.PodReport{}
}

func allRunning(a *agent.Agent, n int) func() bool {
	return func() bool {
		s := a.Snapshot()
		if s.Total != n {
			return false
		}
		for _, p := range s.Pods {
			if p.State != agent.PodRunning || (p.Startup == 0 && !p.Adopted) {
				return false
			}
		}
		return true
	}
}

var modes = []agent.Mode{agent.ModeBaseline, agent.ModeSyncPod}
