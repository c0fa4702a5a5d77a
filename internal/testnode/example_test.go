package testnode_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/syncpod/syncpod/internal/testnode"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A real-node test: start a node, push an image, run a container that
// exits 3, and see its exit code. (An Example cannot run against a real
// node with fixed output, so this one only compiles.)
func Example() {
	testRealNodeExitCode := func(t *testing.T) {
		n := testnode.Start(t) // skips, or fails with SYNCPOD_REALNODE=require
		img := n.PushImage(t, "example/app", testnode.WithSize(4<<20))

		ctx := context.Background()
		rs, is := n.RuntimeService(), n.ImageService()
		if _, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
			t.Fatal(err)
		}
		sb := n.SandboxConfig("example", "uid-1")
		pod, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sb})
		if err != nil {
			t.Fatal(err)
		}
		c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
			PodSandboxId:  pod.PodSandboxId,
			Config:        n.ContainerConfig("app", img, "echo", "hello", "exit", "3"),
			SandboxConfig: sb,
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
			t.Fatal(err)
		}
		for {
			st, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
			if err != nil {
				t.Fatal(err)
			}
			if st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
				fmt.Println("exit code", st.Status.ExitCode) // exit code 3
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Println("layer fetches:", n.BlobFetches()) // each layer once
		// Pods, containerd, shims, mounts and the registry go at t.Cleanup.
	}
	_ = testRealNodeExitCode
}
