package pleg

import (
	"context"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/internal/testnode"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Against real containerd: start, stop and remove containers and see the
// events; kill containerd while a container is about to exit, restart it:
// the PLEG falls back to relisting, recovers to evented mode and reports
// the exit exactly once.
func TestRealNodeEventsAndContainerdRestart(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "pleg/app")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := criclient.Dial(ctx, n.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: img}, nil, nil); err != nil {
		t.Fatal(err)
	}
	cache := newFakeCache()
	obs := &modeObserver{modes: make(chan Mode, 100)}
	p, err := New(c, cache, WithRelistPeriod(200*time.Millisecond), WithObserver(obs),
		WithReconnectBackoff(50*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	col := collect(p)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { p.Stop(); <-col.done }()
	waitMode(t, obs, ModeEvented)

	const uid = types.UID("uid-web")
	sbCfg := n.SandboxConfig("web", string(uid))
	sb, err := c.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		id, err := c.CreateContainer(ctx, sb, n.ContainerConfig(name, img, args...), sbCfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	wait := func(e Event) {
		t.Helper()
		waitFor(t, string(e.Type)+" "+e.Data, func() bool { return col.count(e) > 0 })
	}
	wait(ev(uid, ContainerStarted, sb))
	short := run("short", "sleep", "200ms", "exit", "3")
	long := run("long", "pause")
	wait(ev(uid, ContainerStarted, long))
	wait(ev(uid, ContainerDied, short))
	if err := c.StopContainer(ctx, long, 5); err != nil {
		t.Fatal(err)
	}
	wait(ev(uid, ContainerDied, long))
	if err := c.RemoveContainer(ctx, short); err != nil {
		t.Fatal(err)
	}
	wait(ev(uid, ContainerRemoved, short))

	// A container exits while containerd is down.
	late := run("late", "sleep", "1s", "exit", "7")
	wait(ev(uid, ContainerStarted, late))
	n.KillContainerd(t)
	waitMode(t, obs, ModeRelisting)
	time.Sleep(1500 * time.Millisecond) // let "late" exit while containerd is down (not a timing assertion)
	n.RestartContainerd(t)
	waitMode(t, obs, ModeEvented)
	wait(ev(uid, ContainerDied, late))
	if err := p.relist(ctx); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	<-col.done
	got := col.snapshot()
	for _, id := range []string{short, long, late} {
		if k := got[ev(uid, ContainerDied, id)]; k != 1 {
			t.Errorf("ContainerDied(%s) reported %d times", id, k)
		}
		if k := got[ev(uid, ContainerStarted, id)]; k > 1 {
			t.Errorf("ContainerStarted(%s) reported %d times", id, k)
		}
	}
	if s := cache.containerStates(uid); s[late] != runtimeapi.ContainerState_CONTAINER_EXITED || s[long] != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("cache = %v", s)
	}
	t.Logf("events %v; stats %+v", got, p.Stats())
}
