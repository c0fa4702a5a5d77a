package crisim_test

import (
	"context"
	"fmt"
	"log"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/crisim"
)

// Drive a Runtime in-process on a fake clock: a container scripted to exit
// after 30s exits exactly when the test steps the clock past it.
func ExampleNew() {
	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := crisim.New(crisim.WithClock(clk), crisim.WithImage("busybox:1.36", 2<<20))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	ctx := context.Background()

	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "batch", Namespace: "default", Uid: "uid-7"},
	}})
	if err != nil {
		log.Fatal(err)
	}
	c, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.PodSandboxId,
		Config: &runtimeapi.ContainerConfig{
			Metadata:    &runtimeapi.ContainerMetadata{Name: "work"},
			Image:       &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36"}, // same image, normalised
			Annotations: map[string]string{crisim.AnnotationExitAfter: "30s", crisim.AnnotationExitCode: "0"},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		log.Fatal(err)
	}
	state := func() {
		st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
		if err != nil {
			log.Fatal(err)
		}
		if st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			fmt.Println(st.Status.State, st.Status.Reason, "after", time.Duration(st.Status.FinishedAt-st.Status.StartedAt))
			return
		}
		fmt.Println(st.Status.State)
	}
	state()
	clk.Step(30 * time.Second)
	state()

	// Output:
	// CONTAINER_RUNNING
	// CONTAINER_EXITED Completed after 30s
}
