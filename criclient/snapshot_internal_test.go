package criclient

import (
	"context"
	"fmt"
	cri "k8s.io/cri-api/pkg/apis"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient/crisim"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestConcurrentIdenticalListsMakeOneRuntimeCall holds the runtime's answer
// until all callers are waiting on the refresh, so they can only be served by
// merging (singleflight), not by a snapshot that is already there.
func TestConcurrentIdenticalListsMakeOneRuntimeCall(t *testing.T) {
	const callers = 50
	simClock := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	srv, err := crisim.Start(crisim.WithClock(simClock), crisim.WithImage("busybox", 1<<20),
		crisim.WithLatency("ListContainers", crisim.Fixed(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rt := srv.Runtime()
	c, err := Dial(context.Background(), srv.Endpoint(),
		WithListSnapshots(time.Second), WithClock(clocktesting.NewFakeClock(time.Unix(0, 0))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u", Namespace: "ns"}}
	sb, err := c.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		cc := &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprint("c", i)},
			Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		}
		if _, err := c.CreateContainer(ctx, sb, cc, cfg); err != nil {
			t.Fatal(err)
		}
	}
	rt.ResetCalls()

	var wg sync.WaitGroup
	lens := make([]int, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			var got []*runtimeapi.Container
			got, errs[i] = c.ListContainers(ctx, nil)
			lens[i] = len(got)
		})
	}
	for rt.InFlight("ListContainers") != 1 || c.containers.waiting.Load() != callers {
		time.Sleep(time.Millisecond) // polling a condition
	}
	simClock.Step(time.Second)
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || lens[i] != 3 {
			t.Fatalf("caller %d: %d containers, %v", i, lens[i], errs[i])
		}
	}
	if got := rt.Calls("ListContainers"); got != 1 {
		t.Fatalf("%d concurrent identical Lists made %d runtime calls, want 1", callers, got)
	}
}

// TestEveryCRIMethodIsKnown keeps methodSpecs in step with cri-api's
// interfaces (the service also has streaming List RPCs that the interfaces
// do not expose).
func TestEveryCRIMethodIsKnown(t *testing.T) {
	want := map[string]bool{}
	for _, iface := range []reflect.Type{
		reflect.TypeFor[cri.RuntimeService](),
		reflect.TypeFor[cri.ImageManagerService](),
	} {
		for m := range iface.Methods() {
			if m.Name != "Close" {
				want[m.Name] = true
			}
		}
	}
	for name := range want {
		if _, ok := methodSpecs[name]; !ok {
			t.Errorf("CRI method %s has no admission class/timeout", name)
		}
	}
	for name := range methodSpecs {
		if !want[name] {
			t.Errorf("methodSpecs has %s, which cri-api does not", name)
		}
	}
}
