package shim_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/crishim/shim"
)

// startPod runs a sandbox with one started container through the shim.
func startPod(t *testing.T, sv *served, name string) (sandboxID, containerID string) {
	t.Helper()
	ctx := ctxT(t)
	sb, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(name)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sv.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: containerConfig("app"), SandboxConfig: sandboxConfig(name)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sv.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatal(err)
	}
	return sb.PodSandboxId, c.ContainerId
}

func statusReads(srv *crisim.Server) int64 {
	return srv.Runtime().Calls("PodSandboxStatus") + srv.Runtime().Calls("ContainerStatus")
}

// sameAsRuntime checks that the shim's non-verbose answers equal the
// runtime's own.
func sameAsRuntime(t *testing.T, srv *crisim.Server, sv *served, sandboxID, containerID string) {
	t.Helper()
	ctx := ctxT(t)
	gotSB, err := sv.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID})
	if err != nil {
		t.Fatal(err)
	}
	gotC, err := sv.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID})
	if err != nil {
		t.Fatal(err)
	}
	wantSB, _ := srv.Runtime().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID})
	wantC, _ := srv.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID})
	if !proto.Equal(gotSB.GetStatus(), wantSB.GetStatus()) {
		t.Errorf("PodSandboxStatus through the shim\n%v\nruntime\n%v", gotSB.GetStatus(), wantSB.GetStatus())
	}
	if !proto.Equal(gotC.GetStatus(), wantC.GetStatus()) {
		t.Errorf("ContainerStatus through the shim\n%v\nruntime\n%v", gotC.GetStatus(), wantC.GetStatus())
	}
}

func waitFollowing(t *testing.T, srv *crisim.Server, sv *served) {
	t.Helper()
	eventually(t, "the view's stream", func() bool { return srv.Runtime().Subscribers() == 1 })
	eventually(t, "the shim following the view's events", func() bool { return sv.shim.View().Stats().Subscribers == ownSubscribers })
}

// A status read right after the shim's own mutation sees it, and is
// answered without a status call to the runtime.
func TestStatusReadYourWrites(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{RelistPeriod: time.Hour})
	waitFollowing(t, srv, sv)
	ctx := ctxT(t)
	sbID, cID := startPod(t, sv, "web")
	before := statusReads(srv)
	st, err := sv.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cID})
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || st.Status.StartedAt == 0 {
		t.Fatalf("ContainerStatus right after StartContainer: %v %v", st, err)
	}
	sb, err := sv.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID})
	if err != nil || sb.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || sb.Status.Labels["app"] != "web" {
		t.Fatalf("PodSandboxStatus right after RunPodSandbox: %v %v", sb, err)
	}
	if got := statusReads(srv) - before; got != 0 {
		t.Errorf("%d status calls reached the runtime, want 0 (answered from what the shim saw)", got)
	}
	sameAsRuntime(t, srv, sv, sbID, cID)

	if _, err := sv.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cID}); err != nil {
		t.Fatal(err)
	}
	st, err = sv.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cID})
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.Status.FinishedAt == 0 {
		t.Fatalf("ContainerStatus right after StopContainer: %v %v", st, err)
	}
	cs, err := sv.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil || len(cs.GetContainers()) != 0 {
		t.Fatalf("running containers after StopContainer: %v %v", cs, err)
	}
	sameAsRuntime(t, srv, sv, sbID, cID)
	if _, err := sv.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: cID}); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cID}); status.Code(err) != codes.NotFound {
		t.Errorf("ContainerStatus after RemoveContainer: %v, want NotFound", err)
	}
}

// Verbose reads and ids the view does not know reach the runtime.
func TestStatusVerboseAndUnknownForwarded(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{})
	waitFollowing(t, srv, sv)
	ctx := ctxT(t)
	sbID, cID := startPod(t, sv, "web")
	before := srv.Runtime().Calls("PodSandboxStatus")
	if _, err := sv.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID, Verbose: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "unknown"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown sandbox: %v, want the runtime's NotFound", err)
	}
	if got := srv.Runtime().Calls("PodSandboxStatus") - before; got != 2 {
		t.Errorf("%d PodSandboxStatus calls reached the runtime, want 2 (verbose, unknown)", got)
	}
	before = srv.Runtime().Calls("ContainerStatus")
	if _, err := sv.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cID, Verbose: true}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Runtime().Calls("ContainerStatus") - before; got != 1 {
		t.Errorf("%d ContainerStatus calls reached the runtime, want 1 (verbose)", got)
	}
}

// A change nobody told the shim about (its event lost) shows in status
// reads at the latest after the next relist: one relist period.
func TestStatusExternalChangeWithinOneRelist(t *testing.T) {
	srv := startCrisim(t)
	clk := clocktesting.NewFakeClock(time.Now())
	sv := serve(t, srv.Endpoint(), shim.Config{Clock: clk, RelistPeriod: time.Second, MaxStaleness: 10 * time.Second})
	waitFollowing(t, srv, sv)
	ctx := ctxT(t)
	_, cID := startPod(t, sv, "web")
	if _, err := sv.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cID}); err != nil {
		t.Fatal(err)
	}
	srv.Runtime().DropNextEvents(1)
	if err := srv.Runtime().ExitContainer(cID, 3); err != nil {
		t.Fatal(err)
	}
	st, err := sv.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cID})
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("before a relist: %v %v, want the last state seen (RUNNING)", st, err)
	}
	relists := sv.shim.View().Stats().Relists
	clk.Step(time.Second)
	eventually(t, "a relist", func() bool { return sv.shim.View().Stats().Relists > relists })
	st, err = sv.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cID})
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.Status.ExitCode != 3 {
		t.Fatalf("after one relist period: %v %v, want EXITED(3)", st, err)
	}
}

// A runtime that hangs every read does not hold reads of known objects.
func TestStatusAndListsDuringStall(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{})
	waitFollowing(t, srv, sv)
	sbID, cID := startPod(t, sv, "web")
	sameAsRuntime(t, srv, sv, sbID, cID)
	srv.Runtime().Stall(time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil {
		t.Errorf("ListPodSandbox during a stall: %v", err)
	}
	if cs, err := sv.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil || len(cs.GetContainers()) != 1 {
		t.Errorf("ListContainers during a stall: %v %v", cs, err)
	}
	if _, err := sv.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID}); err != nil {
		t.Errorf("PodSandboxStatus during a stall: %v", err)
	}
	if st, err := sv.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cID}); err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("ContainerStatus during a stall: %v %v", st, err)
	}
}

// Past the staleness bound a frozen runtime is reported as not ready at
// once, and status reads of listed objects are answered from the held
// status, as Lists are.
func TestStatusPastTheBound(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{RelistPeriod: 20 * time.Millisecond, MaxStaleness: 300 * time.Millisecond})
	waitFollowing(t, srv, sv)
	ctx := ctxT(t)
	_, cID := startPod(t, sv, "web")
	if _, err := sv.rt.Status(ctx, &runtimeapi.StatusRequest{}); err != nil {
		t.Fatal(err)
	}
	ver, err := sv.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Runtime().Stall(time.Minute)
	eventually(t, "unhealthy", func() bool { return sv.shim.Health() != nil })
	st, err := sv.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !runtimeUnresponsive(st) {
		t.Errorf("Status of a frozen runtime: %v", st)
	}
	// ctxT's deadline is far inside the stall: a forwarded Version fails.
	if v, err := sv.rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil || v.GetRuntimeVersion() != ver.GetRuntimeVersion() || v.GetRuntimeName() != ver.GetRuntimeName() {
		t.Errorf("Version past the bound: %v %v, want the last answer %v", v, err, ver)
	}
	if cs, err := sv.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cID}); err != nil || cs.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("ContainerStatus past the bound: %v %v, want the held RUNNING", cs, err)
	}
}

// A Status or Version the runtime holds while the view is still fresh is
// answered once the staleness bound passes (RuntimeUnresponsive; the last
// Version), never held until the runtime wakes.
func TestHeldStatusAnsweredAtTheBound(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{RelistPeriod: 20 * time.Millisecond, MaxStaleness: 300 * time.Millisecond})
	ctx := ctxT(t)
	eventually(t, "healthy", func() bool { return sv.shim.Health() == nil })
	ver, err := sv.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Runtime().HangNext("Status", 1); err != nil {
		t.Fatal(err)
	}
	if err := srv.Runtime().HangNext("Version", 1); err != nil {
		t.Fatal(err)
	}
	// ctxT's deadline is far beyond the bound: an answer means the shim
	// stopped waiting at the bound.
	st, err := sv.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil || !runtimeUnresponsive(st) {
		t.Errorf("held Status: %v %v, want RuntimeUnresponsive", st, err)
	}
	if v, err := sv.rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil || v.GetRuntimeVersion() != ver.GetRuntimeVersion() {
		t.Errorf("held Version: %v %v, want the last answer %v", v, err, ver)
	}
	if sv.shim.Health() != nil {
		t.Errorf("the view went stale: %v", sv.shim.Health())
	}
	// The next Status reaches the runtime again.
	if st, err := sv.rt.Status(ctx, &runtimeapi.StatusRequest{}); err != nil || runtimeUnresponsive(st) {
		t.Errorf("Status after the hang: %v %v", st, err)
	}
}

// With the runtime's event stream down, the shim's own mutations are
// still read back exactly (confirmed by status calls instead).
func TestStatusEventStreamDown(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{RelistPeriod: time.Hour})
	waitFollowing(t, srv, sv)
	srv.Runtime().FailNext("GetContainerEvents", 1<<20, status.Error(codes.Unavailable, "no events"))
	srv.Runtime().CutEventStreamsAfter(0)
	eventually(t, "the stream to break", func() bool {
		return sv.shim.View().Stats().StreamBreaks > 0 && sv.shim.View().Stats().Subscribers == 0
	})
	ctx := ctxT(t)
	sbID, cID := startPod(t, sv, "web")
	cs, err := sv.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(cs.GetContainers()) != 1 || cs.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ListContainers with no events: %v %v", cs, err)
	}
	sameAsRuntime(t, srv, sv, sbID, cID)
	if _, err := sv.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cID}); err != nil {
		t.Fatal(err)
	}
	sameAsRuntime(t, srv, sv, sbID, cID)
}
