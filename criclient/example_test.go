package criclient_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Dial a runtime (here the simulated one), run a pod and a container, and
// test gRPC codes on errors.
func Example() {
	srv, err := crisim.Start(crisim.WithImage("busybox:1.36", 4<<20))
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

	podConfig := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Uid: "uid-1", Namespace: "default"},
	}
	podID, err := c.RunPodSandbox(ctx, podConfig, "")
	if err != nil {
		log.Fatal(err)
	}
	ctrID, err := c.CreateContainer(ctx, podID, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "nginx"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox:1.36"},
	}, podConfig)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.StartContainer(ctx, ctrID); err != nil {
		log.Fatal(err)
	}
	running, _ := c.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	fmt.Println("running containers:", len(running))

	_, err = c.ContainerStatus(ctx, "no-such-id", false)
	fmt.Println("unknown container:", status.Code(err) == codes.NotFound)
	// Output:
	// running containers: 1
	// unknown container: true
}

// Serve health checks and relists from one shared List per period, and keep
// mutation bursts from crowding out reads.
func ExampleWithListSnapshots() {
	srv, err := crisim.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx := context.Background()
	c, err := criclient.Dial(ctx, srv.Endpoint(),
		criclient.WithListSnapshots(time.Minute),
		criclient.WithAdmission(criclient.ClassMutating, criclient.Limits{QPS: 50, Burst: 100, MaxInFlight: 8}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for range 10 {
		if _, err := c.ListPodSandbox(ctx, nil); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("runtime ListPodSandbox calls for 10 Lists:", srv.Runtime().Calls("ListPodSandbox"))

	// A mutation through the client drops the snapshot: the next List sees it.
	if _, err := c.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u", Namespace: "ns"},
	}, ""); err != nil {
		log.Fatal(err)
	}
	pods, _ := c.ListPodSandbox(ctx, nil)
	fmt.Println("pods:", len(pods), "runtime calls:", srv.Runtime().Calls("ListPodSandbox"))
	// Output:
	// runtime ListPodSandbox calls for 10 Lists: 1
	// pods: 1 runtime calls: 2
}

// Tell the client's timeout from the caller's deadline.
func ExampleErrTimeout() {
	srv, err := crisim.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c, err := criclient.Dial(ctx, srv.Endpoint(), criclient.WithMethodTimeout("Status", 10*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	srv.Runtime().HangNext("Status", 1)
	_, err = c.Status(ctx, false)
	fmt.Println(status.Code(err), errors.Is(err, criclient.ErrTimeout))
	// Output: DeadlineExceeded true
}

// Count runtime calls with an observer, and hand the client to code written
// against cri-api's interfaces.
func ExampleWithObserver() {
	srv, err := crisim.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	var calls []string
	c, err := criclient.Dial(context.Background(), srv.Endpoint(),
		criclient.WithObserver(func(e criclient.Event) {
			if e.Kind == criclient.CallFinished {
				calls = append(calls, e.Method)
			}
		}))
	if err != nil {
		log.Fatal(err)
	}
	var rs cri.RuntimeService = c.CRI()
	if _, err := rs.Status(context.Background(), false); err != nil {
		log.Fatal(err)
	}
	_ = rs.Close(context.Background()) // closes c
	fmt.Println(calls)
	// Output: [Version Status]
}
