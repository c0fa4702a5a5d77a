package crisim_test

import (
	"context"
	"fmt"
	"log"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
)

// Start a simulated runtime, run a pod whose container exits on its own with
// code 3, watch its events, inject a fault and count calls.
func Example() {
	srv, err := crisim.Start(crisim.WithImage("busybox:1.36", 2<<20))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	// Any CRI client works; criclient.Dial(ctx, srv.Endpoint()) is the usual one.
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	events, err := rs.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.Runtime().WaitSubscribers(ctx, 1); err != nil { // the stream is registered
		log.Fatal(err)
	}

	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "job", Namespace: "default", Uid: "uid-1"},
	}})
	if err != nil {
		log.Fatal(err)
	}
	c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.PodSandboxId,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
			Image:    &runtimeapi.ImageSpec{Image: "busybox:1.36"},
			Annotations: map[string]string{
				crisim.AnnotationExitAfter: "0s",
				crisim.AnnotationExitCode:  "3",
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		log.Fatal(err)
	}
	for range 5 { // sandbox CREATED, STARTED; container CREATED, STARTED, STOPPED
		ev, err := events.Recv()
		if err != nil {
			log.Fatal(err)
		}
		kind := "container"
		if ev.ContainerId == sb.PodSandboxId {
			kind = "sandbox"
		}
		fmt.Println(kind, ev.ContainerEventType, "pod", ev.PodSandboxStatus.Metadata.Name, "containers", len(ev.ContainersStatuses))
	}
	st, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Status.State, "exit code", st.Status.ExitCode)

	srv.Runtime().FailNext("ListContainers", 1, status.Error(codes.Unavailable, "runtime restarting"))
	_, err = rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	fmt.Println("ListContainers:", status.Code(err))
	fmt.Println("ListContainers calls:", srv.Runtime().Calls("ListContainers"))

	// Output:
	// sandbox CONTAINER_CREATED_EVENT pod job containers 0
	// sandbox CONTAINER_STARTED_EVENT pod job containers 0
	// container CONTAINER_CREATED_EVENT pod job containers 1
	// container CONTAINER_STARTED_EVENT pod job containers 1
	// container CONTAINER_STOPPED_EVENT pod job containers 1
	// CONTAINER_EXITED exit code 3
	// ListContainers: Unavailable
	// ListContainers calls: 1
}
