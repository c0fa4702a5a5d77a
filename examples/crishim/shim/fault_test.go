package shim_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/examples/crishim/shim"
	"github.com/syncpod/syncpod/internal/testnode"
)

// A slow backend (every call stalled): Lists are answered from the view
// throughout, within the bound and past it, while past it Health and
// Status report the runtime unresponsive; both recover when the backend
// answers again.
func TestSlowBackend(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{RelistPeriod: 20 * time.Millisecond, MaxStaleness: time.Second})
	ctx := ctxT(t)
	if _, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "healthy", func() bool { return sv.shim.Health() == nil })
	if _, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil { // the RunPodSandbox is confirmed
		t.Fatal(err)
	}
	srv.Runtime().Stall(3 * time.Second)
	pods, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil && status.Code(err) != codes.Unavailable {
		t.Fatalf("ListPodSandbox during a stall: %v", err)
	}
	if err == nil && len(pods.GetItems()) != 1 {
		t.Fatalf("ListPodSandbox during a stall: %v", pods)
	}
	eventually(t, "unhealthy during the stall", func() bool { return sv.shim.Health() != nil })
	if pods, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil || len(pods.GetItems()) != 1 {
		t.Fatalf("ListPodSandbox past the bound: %v %v, want the last view", pods, err)
	}
	st, err := sv.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil || !runtimeUnresponsive(st) {
		t.Fatalf("Status past the bound: %v %v, want RuntimeReady false, RuntimeUnresponsive", st, err)
	}
	eventually(t, "healthy after the stall", func() bool { return sv.shim.Health() == nil })
	pods, err = sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.GetItems()) != 1 {
		t.Fatalf("after the stall: %v %v", pods, err)
	}
}

// containerd killed under the shim: event streams end with Unavailable,
// forwarded calls fail, Lists answer the last view, Health and Status say
// the runtime is down; after the restart the shim recovers by itself,
// reads see the node again and new streams work.
func TestRealNodeBackendKilledAndRestarted(t *testing.T) {
	n := testnode.Start(t)
	sv := serve(t, n.Endpoint, shim.Config{RelistPeriod: 100 * time.Millisecond, MaxStaleness: 2 * time.Second})
	ctx := ctxT(t)
	sb, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: n.SandboxConfig("web", "uid-web")})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.GetItems()) != 1 || pods.Items[0].Id != sb.PodSandboxId {
		t.Fatalf("ListPodSandbox after RunPodSandbox: %v %v", pods, err)
	}
	events, err := sv.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "healthy", func() bool { return sv.shim.Health() == nil })

	n.KillContainerd(t)
	var end error
	for end == nil {
		_, end = events.Recv()
	}
	if status.Code(end) != codes.Unavailable {
		t.Errorf("event stream after the kill: %v, want Unavailable", end)
	}
	eventually(t, "unhealthy", func() bool { return sv.shim.Health() != nil })
	if pods, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil || len(pods.GetItems()) != 1 || pods.Items[0].Id != sb.PodSandboxId {
		t.Errorf("ListPodSandbox with containerd down: %v %v, want the last view", pods, err)
	}
	if st, err := sv.rt.Status(ctx, &runtimeapi.StatusRequest{}); err != nil || !runtimeUnresponsive(st) {
		t.Errorf("Status with containerd down: %v %v, want RuntimeUnresponsive", st, err)
	}
	if _, err := sv.rt.Version(ctx, &runtimeapi.VersionRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("Version with containerd down, never answered before: %v, want Unavailable", err)
	}
	if _, err := sv.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("ListPodSandboxStats (forwarded) with containerd down: %v, want Unavailable", err)
	}

	n.RestartContainerd(t)
	eventually(t, "healthy after the restart", func() bool { return sv.shim.Health() == nil })
	pods, err = sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.GetItems()) != 1 || pods.Items[0].Id != sb.PodSandboxId {
		t.Fatalf("ListPodSandbox after the restart: %v %v", pods, err)
	}
	events, err = sv.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the subscription", func() bool { return sv.shim.View().Stats().Subscribers == ownSubscribers+1 })
	if _, err := sv.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	ev, err := events.Recv()
	if err != nil {
		t.Fatalf("event stream after the restart: %v", err)
	}
	t.Logf("event after restart: %v %s", ev.GetContainerEventType(), ev.GetContainerId())
	pods, err = sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.GetItems()) != 1 || pods.Items[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("ListPodSandbox after StopPodSandbox: %v %v", pods, err)
	}
}
