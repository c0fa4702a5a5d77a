package pleg

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const simImage = "busybox:1.36"

// startSim serves a crisim runtime and dials it with criclient.
func startSim(t testing.TB, opts ...crisim.Option) (*crisim.Runtime, *criclient.Client) {
	t.Helper()
	srv, err := crisim.Start(append([]crisim.Option{crisim.WithImage(simImage, 1<<20)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := criclient.Dial(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return srv.Runtime(), c
}

func simSandbox(i int) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("pod%d", i), Namespace: "ns", Uid: fmt.Sprintf("uid-%03d", i)}}
}

type simPod struct {
	uid        types.UID
	sandbox    string
	cfg        *runtimeapi.PodSandboxConfig
	containers []string
}

// makePods creates pods x containers running containers.
func makePods(t testing.TB, c *criclient.Client, pods, containers int) []*simPod {
	t.Helper()
	ctx := context.Background()
	var out []*simPod
	for i := range pods {
		cfg := simSandbox(i)
		sb, err := c.RunPodSandbox(ctx, cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		sp := &simPod{uid: types.UID(cfg.Metadata.Uid), sandbox: sb, cfg: cfg}
		for j := range containers {
			sp.containers = append(sp.containers, startContainer(t, c, sp, fmt.Sprintf("c%d", j), 0))
		}
		out = append(out, sp)
	}
	return out
}

func startContainer(t testing.TB, c *criclient.Client, sp *simPod, name string, attempt uint32) string {
	t.Helper()
	ctx := context.Background()
	id, err := c.CreateContainer(ctx, sp.sandbox, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: simImage},
	}, sp.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// collector counts every event delivered until the channel closes.
type collector struct {
	mu     sync.Mutex
	counts map[Event]int
	done   chan struct{}
}

// startCollecting collects p's events and starts p; stop closes p and
// waits for the collector to read the last event.
func startCollecting(t *testing.T, p *PLEG) (col *collector, stop func()) {
	t.Helper()
	col = collect(p)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return col, func() { p.Close(); <-col.done }
}

func collect(p *PLEG) *collector {
	c := &collector{counts: map[Event]int{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for e := range p.Watch() {
			c.mu.Lock()
			c.counts[e]++
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *collector) count(e Event) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[e]
}

func (c *collector) snapshot() map[Event]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[Event]int{}
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// quiesce waits until no pod relist is pending, due or running.
func quiesce(t testing.TB, p *PLEG) {
	t.Helper()
	waitFor(t, "pod relists done", func() bool {
		p.mu.Lock()
		idle := len(p.pending) == 0 && len(p.reinspect) == 0
		p.mu.Unlock()
		if !idle || !p.podRelistMu.TryLock() {
			return false
		}
		p.podRelistMu.Unlock()
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.pending) == 0 && len(p.reinspect) == 0
	})
}

// Event streams are cut every few events and some events are lost while
// containers exit, are removed and are replaced: every exit is still
// reported exactly once per container instance, and the cache ends equal to
// the runtime.
func TestSimStreamCutsEveryExitReportedOnce(t *testing.T) {
	rt, c := startSim(t)
	cache := newFakeCache()
	p, err := New(c, cache,
		WithRelistPeriod(50*time.Millisecond), WithSafetyNetPeriod(250*time.Millisecond),
		WithProbePeriod(100*time.Millisecond), WithBackOff(5*time.Millisecond, 40*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	col, stop := startCollecting(t, p)
	defer stop()
	waitFor(t, "evented mode", func() bool { return p.Mode() == ModeEvented })

	pods := makePods(t, c, 10, 3)
	rt.CutEventStreamsAfter(4)
	ctx := context.Background()
	var exitedIDs, removedIDs []string
	for i, sp := range pods {
		for j, id := range sp.containers {
			if err := rt.ExitContainer(id, int32(j)); err != nil {
				t.Fatal(err)
			}
			exitedIDs = append(exitedIDs, id)
			if (i+j)%3 == 0 {
				if err := c.RemoveContainer(ctx, id); err != nil {
					t.Fatal(err)
				}
				removedIDs = append(removedIDs, id)
			}
			if (i+j)%5 == 0 { // restart: a new instance that exits too
				nid := startContainer(t, c, sp, fmt.Sprintf("c%d", j), 1)
				if err := rt.ExitContainer(nid, 1); err != nil {
					t.Fatal(err)
				}
				exitedIDs = append(exitedIDs, nid)
			}
		}
		if i == 4 {
			rt.DropNextEvents(3)
		}
	}
	uidOf := map[string]types.UID{}
	for _, sp := range pods {
		for _, id := range sp.containers {
			uidOf[id] = sp.uid
		}
	}
	// Replacement containers: look their pod up in the runtime.
	all, err := c.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	sbUID := map[string]types.UID{}
	for _, sp := range pods {
		sbUID[sp.sandbox] = sp.uid
	}
	for _, ct := range all {
		uidOf[ct.Id] = sbUID[ct.PodSandboxId]
	}
	waitFor(t, "every exit reported", func() bool {
		for _, id := range exitedIDs {
			if col.count(ev(uidOf[id], ContainerDied, id)) == 0 {
				return false
			}
		}
		for _, id := range removedIDs {
			if col.count(ev(uidOf[id], ContainerRemoved, id)) == 0 {
				return false
			}
		}
		return true
	})
	rt.CutEventStreamsAfter(-1)
	quiesce(t, p)
	if err := p.relist(ctx); err != nil { // one more full pass must not duplicate anything
		t.Fatal(err)
	}
	quiesce(t, p)
	p.Close()
	<-col.done
	got := col.snapshot()
	for _, id := range exitedIDs {
		if n := got[ev(uidOf[id], ContainerDied, id)]; n != 1 {
			t.Errorf("container %s: ContainerDied reported %d times", id, n)
		}
	}
	for _, id := range removedIDs {
		if n := got[ev(uidOf[id], ContainerRemoved, id)]; n != 1 {
			t.Errorf("container %s: ContainerRemoved reported %d times", id, n)
		}
	}
	for e, n := range got {
		if n > 1 && e.Type != PodSync {
			t.Errorf("%v reported %d times", e, n)
		}
	}
	// The cache equals the runtime.
	for _, sp := range pods {
		cs, err := c.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sp.sandbox})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]runtimeapi.ContainerState{}
		for _, ct := range cs {
			want[ct.Id] = ct.State
		}
		if got := cache.containerStates(sp.uid); fmt.Sprint(got) != fmt.Sprint(want) {
			e, _ := cache.get(sp.uid)
			t.Errorf("pod %s: cache %v (err %v), runtime %v", sp.uid, got, e.err, want)
		}
	}
	st := p.Stats()
	if st.StreamErrors == 0 || st.StreamConnects < 2 {
		t.Errorf("the stream was never cut: %+v", st)
	}
	t.Logf("stats: %+v", st)
}

// The runtime stalls for longer than the threshold: Healthy turns false
// with a clear message, then true again once the runtime answers.
func TestSimStallUnhealthyThenHealthy(t *testing.T) {
	rt, c := startSim(t)
	p, err := New(c, newFakeCache(),
		WithThreshold(400*time.Millisecond), WithRelistPeriod(50*time.Millisecond),
		WithProbePeriod(50*time.Millisecond), WithSafetyNetPeriod(200*time.Millisecond),
		WithRelistTimeout(5*time.Second), WithBackOff(5*time.Millisecond, 40*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	makePods(t, c, 2, 1)
	waitFor(t, "healthy", func() bool { ok, _ := p.Healthy(); return ok })
	rt.Stall(3 * time.Second)
	var herr error
	waitFor(t, "unhealthy during the stall", func() bool {
		ok, err := p.Healthy()
		herr = err
		return !ok
	})
	if !strings.Contains(herr.Error(), "pleg was last seen active") || !strings.Contains(herr.Error(), "threshold is 400ms") {
		t.Errorf("message: %v", herr)
	}
	waitFor(t, "healthy after the stall", func() bool { ok, _ := p.Healthy(); return ok })
}
