package testnode

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// WaitContainerExited polls ContainerStatus on the node's own connection
// until the container has exited and returns its final status. It fails
// the test if that takes longer than timeout or the status call fails.
func (n *Node) WaitContainerExited(t testing.TB, id string, timeout time.Duration) *runtimeapi.ContainerStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := n.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			t.Fatalf("testnode: wait for %s to exit: %v", id, err)
		}
		if st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return st.GetStatus()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testnode: container %s did not exit within %v (state %v)", id, timeout, st.GetStatus().GetState())
		case <-tick.C:
		}
	}
}
