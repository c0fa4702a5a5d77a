package pleg_test

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/pleg"
	"github.com/syncpod/syncpod/statecache"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"
)

// A relisting PLEG over cri-api's fake runtime, on a fake clock: the first
// relist (at Start) reports what runs, the cache holds the pod's status.
func Example() {
	rt := critest.NewFakeRuntimeService()
	rt.SetFakeSandboxes([]*critest.FakePodSandbox{{PodSandboxStatus: runtimeapi.PodSandboxStatus{
		Id: "sandbox-1", State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"},
	}}})
	rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "sandbox-1", ContainerStatus: runtimeapi.ContainerStatus{
		Id: "app-1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
	}}})
	cache := statecache.New[types.UID, *pleg.PodStatus]()
	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

	p, err := pleg.New(rt, cache, pleg.WithClock(clk), pleg.WithEventStream(false))
	if err != nil {
		panic(err)
	}
	if err := p.Start(context.Background()); err != nil {
		panic(err)
	}
	defer p.Close()

	var evs []pleg.Event
	for len(evs) < 2 {
		evs = append(evs, <-p.Watch())
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].Data < evs[j].Data })
	for _, e := range evs {
		fmt.Println(e.ID, e.Type, e.Data)
	}
	st, _ := cache.Get("uid-1")
	fmt.Println(st.Namespace+"/"+st.Name, len(st.SandboxStatuses), "sandbox,", len(st.ContainerStatuses), "container, at", st.Timestamp.Format(time.RFC3339))
	ok, _ := p.Healthy()
	fmt.Println("healthy:", ok, "mode:", p.Mode())
	// Output:
	// uid-1 ContainerStarted app-1
	// uid-1 ContainerStarted sandbox-1
	// default/web 1 sandbox, 1 container, at 2026-01-01T00:00:00Z
	// healthy: true mode: relisting
}

// Healthy before the runtime ever answered, and what it says.
func ExamplePLEG_Healthy() {
	rt := critest.NewFakeRuntimeService()
	p, err := pleg.New(rt, statecache.New[types.UID, *pleg.PodStatus]())
	if err != nil {
		panic(err)
	}
	defer p.Close()
	ok, err := p.Healthy()
	fmt.Println(ok, err)
	// Output:
	// false pleg has yet to be successful (mode relisting)
}

// Bad options give a typed error.
func ExampleNew() {
	_, err := pleg.New(critest.NewFakeRuntimeService(), statecache.New[types.UID, *pleg.PodStatus](),
		pleg.WithRelistPeriod(5*time.Minute))
	fmt.Println(err)
	// Output:
	// pleg: WithRelistPeriod: must be > 0 and below the threshold
}

// Waiting for a container to exit, over the simulated runtime's event
// stream: the wait ends on the runtime's event, with the exit code, and
// the cache already holds the exited status.
func ExamplePLEG_WaitContainerState() {
	srv, err := crisim.Start(crisim.WithImage("busybox", 1<<20))
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := criclient.Dial(ctx, srv.Endpoint())
	if err != nil {
		panic(err)
	}
	defer rt.Close()

	cache := statecache.New[types.UID, *pleg.PodStatus]()
	p, err := pleg.New(rt, cache)
	if err != nil {
		panic(err)
	}
	if err := p.Start(ctx); err != nil {
		panic(err)
	}
	defer p.Close()

	sandboxCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"}}
	sandbox, err := rt.RunPodSandbox(ctx, sandboxCfg, "")
	if err != nil {
		panic(err)
	}
	id, err := rt.CreateContainer(ctx, sandbox, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "job"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
	}, sandboxCfg)
	if err != nil {
		panic(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		panic(err)
	}
	st, err := p.WaitContainerState(ctx, "uid-1", id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err != nil {
		panic(err)
	}
	fmt.Println("job:", st.State)

	if err := srv.Runtime().ExitContainer(id, 3); err != nil { // the job's process ends
		panic(err)
	}
	st, err = p.WaitContainerState(ctx, "uid-1", id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if err != nil {
		panic(err)
	}
	fmt.Println("job:", st.State, "exit code", st.ExitCode)
	cached, _ := cache.Get("uid-1")
	fmt.Println("cache:", cached.ContainerStatuses[0].State)
	// Output:
	// job: CONTAINER_RUNNING
	// job: CONTAINER_EXITED exit code 3
	// cache: CONTAINER_EXITED
}
