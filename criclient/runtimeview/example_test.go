package runtimeview_test

import (
	"context"
	"fmt"
	"log"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/criclient/runtimeview"
)

// A view over a simulated runtime: a mutation reported with SandboxChanged
// is visible to the next read, and a subscriber sees the runtime's events.
func Example() {
	srv, err := crisim.Start(crisim.WithImage("busybox:1.36", 1<<20))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c, err := criclient.Dial(ctx, srv.Endpoint())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	v, err := runtimeview.New(c)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = v.Close() }()
	sub, err := v.Subscribe(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	// The CRI gives no signal that a stream is live; wait until the
	// runtime has registered the view's one stream.
	if err := srv.Runtime().WaitSubscribers(ctx, 1); err != nil {
		log.Fatal(err)
	}

	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"}}
	id, err := c.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		log.Fatal(err)
	}
	v.SandboxChanged(id)
	pods, err := v.ListPodSandbox(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(pods), pods[0].GetMetadata().GetName(), pods[0].GetState())
	ev := <-sub.Events()
	fmt.Println(ev.GetContainerEventType(), ev.GetContainerId() == id)
	// Output:
	// 1 web SANDBOX_READY
	// CONTAINER_CREATED_EVENT true
}
