package shim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/criclient/runtimeview"
	"github.com/syncpod/syncpod/examples/crishim/shim"
)

func TestSocketMode(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{})
	fi, err := os.Stat(sv.socket)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != shim.SocketMode {
		t.Errorf("socket mode %o, want %o", got, shim.SocketMode)
	}
	if _, err := shim.Listen("unix://" + sv.socket); err == nil {
		t.Error("Listen replaced a socket a server answers on")
	}
	if _, err := shim.Listen("relative/path"); err == nil {
		t.Error("Listen accepted a relative endpoint")
	}
}

// Mutations through the shim are visible to the next List at once, and
// the backend's codes (Unimplemented, NotFound) come through untouched.
func TestPassthroughReadYourWrites(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{RelistPeriod: time.Hour})
	ctx := ctxT(t)

	v, err := sv.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil || v.GetRuntimeName() == "" {
		t.Fatalf("Version: %v %v", v, err)
	}
	sb, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web")})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.GetItems()) != 1 || pods.Items[0].Id != sb.PodSandboxId {
		t.Fatalf("ListPodSandbox after RunPodSandbox: %v %v", pods, err)
	}
	c, err := sv.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: containerConfig("app"), SandboxConfig: sandboxConfig("web")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sv.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatal(err)
	}
	cs, err := sv.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb.PodSandboxId}})
	if err != nil || len(cs.GetContainers()) != 1 || cs.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ListContainers after StartContainer: %v %v", cs, err)
	}
	if _, err := sv.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	pods, err = sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.GetItems()) != 0 {
		t.Fatalf("ListPodSandbox after RemovePodSandbox: %v %v", pods, err)
	}
	if _, err := sv.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: c.ContainerId, Cmd: []string{"true"}}); status.Code(err) != codes.Unimplemented && status.Code(err) != codes.NotFound {
		t.Errorf("ExecSync on crisim: %v, want the backend's code", err)
	}
	if _, err := sv.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("PodSandboxStatus of unknown id: %v, want NotFound", err)
	}
	// Only the view's own relists reached the backend: how many there are
	// depends on the machine (a relist on connect, another when the event
	// stream opens or breaks), but each is one ListPodSandbox, and none of
	// the test's Lists may add one. A relist in flight is counted by the
	// backend before the view counts it, so wait for the two to agree; a
	// List forwarded to the backend would keep them apart for good.
	eventually(t, "backend ListPodSandbox calls to equal the view's relists", func() bool {
		return srv.Runtime().Calls("ListPodSandbox") == int64(sv.shim.View().Stats().Relists)
	})
}

// A hung mutation does not hold up reads, even with the mutating class at
// one call in flight.
func TestReadsDoNotWaitBehindMutations(t *testing.T) {
	srv := startCrisim(t)
	var cfg shim.Config
	cfg.Limits[shim.ClassMutating] = shim.Limits{MaxInFlight: 1}
	sv := serve(t, srv.Endpoint(), cfg)
	ctx := ctxT(t)
	srv.Runtime().HangNext("RunPodSandbox", 1)
	hung, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() {
		_, err := sv.rt.RunPodSandbox(hung, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("a")})
		done <- err
	}()
	eventually(t, "the hung RunPodSandbox to reach the backend", func() bool { return srv.Runtime().InFlight("RunPodSandbox") == 1 })
	go func() {
		_, err := sv.rt.RunPodSandbox(hung, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("b")})
		done <- err
	}()
	for range 3 {
		if _, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := sv.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := sv.rt.Status(ctx, &runtimeapi.StatusRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Runtime().Calls("RunPodSandbox"); got != 1 {
		t.Errorf("backend saw %d RunPodSandbox calls with MaxInFlight 1 and one hung, want 1", got)
	}
	cancel()
	for range 2 {
		if err := <-done; status.Code(err) != codes.Canceled {
			t.Errorf("cancelled RunPodSandbox: %v", err)
		}
	}
}

// One subscriber that stops reading is cut off with ResourceExhausted; the
// other sees every event; the backend holds one stream.
func TestEventFanoutSlowSubscriber(t *testing.T) {
	srv := startCrisim(t, crisim.WithEventBuffer(100000))
	// A small HTTP/2 window so the stalled client's transport fills up.
	sv := serve(t, srv.Endpoint(), shim.Config{EventBuffer: 4}, grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	fast := serve(t, srv.Endpoint(), shim.Config{EventBuffer: 100000})
	ctx := ctxT(t)
	slow, err := sv.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	quick, err := fast.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "both views' streams", func() bool { return srv.Runtime().Subscribers() == 2 })
	eventually(t, "both subscriptions", func() bool {
		return sv.shim.View().Stats().Subscribers == ownSubscribers+1 && fast.shim.View().Stats().Subscribers == ownSubscribers+1
	})

	const pods = 400
	got := make(chan int, 1)
	go func() {
		n := 0
		for n < pods {
			ev, err := quick.Recv()
			if err != nil {
				break
			}
			if ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT {
				n++
			}
		}
		got <- n
	}()
	for i := range pods {
		cfg := sandboxConfig("p" + string(rune('a'+i%26)) + time.Now().Format("150405.000000000"))
		if _, err := srv.Runtime().RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	if n := <-got; n != pods {
		t.Errorf("fast subscriber saw %d of %d sandbox CREATED events", n, pods)
	}
	eventually(t, "the slow subscriber to be cut off", func() bool { return sv.shim.View().Stats().Overflows > 0 })
	var end error
	for {
		if _, end = slow.Recv(); end != nil {
			break
		}
	}
	if status.Code(end) != codes.ResourceExhausted {
		t.Errorf("slow subscriber ended with %v, want ResourceExhausted", end)
	}
	if full, _ := srv.Runtime().EventsLost(); full != 0 {
		t.Errorf("the backend dropped %d events for full buffers: the shim must keep up", full)
	}
}

// With FailStaleReads a backend that stops answering makes reads fail
// and Health report it once the bound passes; it recovers when the
// backend is back.
func TestBackendStopsAnsweringFailStaleReads(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{RelistPeriod: 20 * time.Millisecond, MaxStaleness: 300 * time.Millisecond, FailStaleReads: true})
	ctx := ctxT(t)
	eventually(t, "healthy", func() bool { return sv.shim.Health() == nil })
	srv.Runtime().SetErrorRate("ListPodSandbox", 1, codes.Unavailable)
	eventually(t, "unhealthy", func() bool { return sv.shim.Health() != nil })
	_, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("ListPodSandbox on a stale view: %v, want Unavailable", err)
	}
	srv.Runtime().SetErrorRate("ListPodSandbox", 0, codes.OK)
	eventually(t, "healthy again", func() bool { return sv.shim.Health() == nil })
	if _, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil {
		t.Fatal(err)
	}
}

// Drain ends event streams and refuses new calls with Unavailable.
func TestDrain(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{})
	ctx := ctxT(t)
	ev, err := sv.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the view's stream", func() bool { return srv.Runtime().Subscribers() == 1 })
	if err := sv.shim.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("event stream after Drain: %v, want Unavailable", err)
	}
	if _, err := sv.rt.Version(ctx, &runtimeapi.VersionRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("Version after Drain: %v, want Unavailable", err)
	}
}

// Async RunPodSandbox: a minted id at once, later calls wait for it and
// see its real error, status and lists show the failure.
func TestAsyncRunPodSandbox(t *testing.T) {
	srv := startCrisim(t, crisim.WithLatency("RunPodSandbox", crisim.Fixed(50*time.Millisecond)))
	sv := serve(t, srv.Endpoint(), shim.Config{AsyncRunPodSandbox: true})
	ctx := ctxT(t)
	events, err := sv.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the view's stream", func() bool { return srv.Runtime().Subscribers() == 1 })
	eventually(t, "the subscription", func() bool { return sv.shim.View().Stats().Subscribers == ownSubscribers+1 })

	resp, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web")})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.PodSandboxId
	st, err := sv.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil || st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || st.Status.Id != id {
		t.Fatalf("PodSandboxStatus of an accepted sandbox: %v %v", st, err)
	}
	if _, dup := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web")}); status.Code(dup) != codes.AlreadyExists {
		t.Errorf("second RunPodSandbox of a pending sandbox: %v, want AlreadyExists", dup)
	}
	c, err := sv.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: id, Config: containerConfig("app"), SandboxConfig: sandboxConfig("web")})
	if err != nil {
		t.Fatalf("CreateContainer in an async sandbox: %v", err)
	}
	cs, err := sv.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: id}})
	if err != nil || len(cs.GetContainers()) != 1 || cs.Containers[0].Id != c.ContainerId || cs.Containers[0].PodSandboxId != id {
		t.Fatalf("ListContainers by minted sandbox id: %v %v", cs, err)
	}
	pods, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.GetItems()) != 1 || pods.Items[0].Id != id {
		t.Fatalf("ListPodSandbox: %v %v", pods, err)
	}
	if _, leaked := pods.Items[0].Labels[shim.SandboxIDLabel]; leaked || pods.Items[0].Labels["app"] != "web" {
		t.Errorf("labels: %v", pods.Items[0].Labels)
	}
	ev, err := events.Recv()
	if err != nil || ev.GetContainerId() != id || ev.GetPodSandboxStatus().GetId() != id {
		t.Errorf("first event: %v %v, want the sandbox under its minted id", ev, err)
	}

	// A failure: the caller's later calls see the runtime's error.
	srv.Runtime().FailNext("RunPodSandbox", 1, status.Error(codes.ResourceExhausted, "no IPs left"))
	resp, err = sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("bad")})
	if err != nil {
		t.Fatal(err)
	}
	bad := resp.PodSandboxId
	_, err = sv.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: bad, Config: containerConfig("app"), SandboxConfig: sandboxConfig("bad")})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("CreateContainer in a failed sandbox: %v, want the RunPodSandbox error", err)
	}
	st, err = sv.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: bad, Verbose: true})
	if err != nil || st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("status of a failed sandbox: %v %v, want NOTREADY", st, err)
	}
	pods, _ = sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}})
	if len(pods.GetItems()) != 1 || pods.Items[0].Id != bad {
		t.Errorf("NOTREADY sandboxes: %v, want the failed one", pods)
	}
	if _, err := sv.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: bad}); err != nil {
		t.Errorf("StopPodSandbox of a failed sandbox: %v", err)
	}
	if _, err := sv.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: bad}); err != nil {
		t.Errorf("RemovePodSandbox of a failed sandbox: %v", err)
	}
	if _, err := sv.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: bad}); status.Code(err) != codes.NotFound {
		t.Errorf("status after removal: %v, want NotFound", err)
	}
	if _, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("RunPodSandbox without metadata: %v, want InvalidArgument", err)
	}
	// The real call finishes before Drain returns.
	if err := sv.shim.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

// A backend error that echoes a registry credential reaches the caller
// with the credential replaced, and the code kept.
func TestPullImageErrorRedactsCredentials(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{})
	ctx := ctxT(t)
	const secret = "s3cr3t-passw0rd"
	srv.Runtime().FailNext("PullImage", 1, status.Error(codes.PermissionDenied, "401 for user bob password "+secret))
	_, err := sv.img.PullImage(ctx, &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: "private/app:1"},
		Auth:  &runtimeapi.AuthConfig{Username: "bob", Password: secret},
	})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("PullImage: %v, want PermissionDenied", err)
	}
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Errorf("PullImage error leaks the password: %v", err)
	}
}

// Credentials as short as criclient scrubs (three characters) are
// scrubbed too, and a token that contains the password is replaced whole.
func TestPullImageErrorRedactsShortCredentials(t *testing.T) {
	srv := startCrisim(t)
	sv := serve(t, srv.Endpoint(), shim.Config{})
	ctx := ctxT(t)
	const password, token = "x9q", "tok-x9q-tok"
	srv.Runtime().FailNext("PullImage", 1, status.Error(codes.PermissionDenied, "401 for bob: password "+password+", token "+token))
	_, err := sv.img.PullImage(ctx, &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: "private/app:1"},
		Auth:  &runtimeapi.AuthConfig{Username: "bob", Password: password, RegistryToken: token},
	})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("PullImage: %v, want PermissionDenied", err)
	}
	if msg, want := status.Convert(err).Message(), "401 for bob: password [REDACTED], token [REDACTED]"; msg != want {
		t.Errorf("PullImage error %q, want %q", msg, want)
	}
}

// A Config the view rejects makes New fail with the view's typed error,
// leaving nothing running (goleak checks).
func TestNewRejectsInvalidViewConfig(t *testing.T) {
	srv := startCrisim(t)
	for _, cfg := range []shim.Config{{RelistPeriod: -time.Second}, {MaxStaleness: -time.Second}} {
		s, err := shim.New(ctxT(t), srv.Endpoint(), cfg)
		var ce *runtimeview.ConfigError
		if !errors.As(err, &ce) {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("New(%+v): %v, want a *runtimeview.ConfigError", cfg, err)
		}
	}
}

// A restarted async shim rebuilds its id map from the label on the
// runtime's sandboxes: the minted id keeps working.
func TestAsyncIDsSurviveRestart(t *testing.T) {
	srv := startCrisim(t)
	ctx := ctxT(t)
	first := serve(t, srv.Endpoint(), shim.Config{AsyncRunPodSandbox: true})
	resp, err := first.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web")})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.shim.Drain(ctx); err != nil { // the real call is done
		t.Fatal(err)
	}
	first.stop()

	second := serve(t, srv.Endpoint(), shim.Config{AsyncRunPodSandbox: true})
	st, err := second.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: resp.PodSandboxId})
	if err != nil || st.GetStatus().GetId() != resp.PodSandboxId || st.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("status by minted id after a restart: %v %v", st, err)
	}
	if _, leaked := st.Status.Labels[shim.SandboxIDLabel]; leaked {
		t.Errorf("status shows the id label: %v", st.Status.Labels)
	}
	pods, err := second.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.GetItems()) != 1 || pods.Items[0].Id != resp.PodSandboxId {
		t.Fatalf("list after a restart: %v %v", pods, err)
	}
	if _, err := second.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: resp.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Runtime().CallCounts()); n == 0 {
		t.Fatal("no calls reached the runtime")
	}
	real, err := srv.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(real.GetItems()) != 0 {
		t.Errorf("runtime still holds %v after RemovePodSandbox by minted id (%v)", real, err)
	}
}

// Drain waits for the RunPodSandbox calls accepted before it: they reach
// the runtime even though new calls are refused.
func TestDrainCompletesAcceptedAsyncCalls(t *testing.T) {
	srv := startCrisim(t, crisim.WithLatency("RunPodSandbox", crisim.Fixed(30*time.Millisecond)))
	sv := serve(t, srv.Endpoint(), shim.Config{AsyncRunPodSandbox: true, AsyncWorkers: 1})
	ctx := ctxT(t)
	const pods = 4
	for i := range pods {
		if _, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(fmt.Sprint("p", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sv.shim.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("late")}); status.Code(err) != codes.Unavailable {
		t.Errorf("RunPodSandbox after Drain: %v, want Unavailable", err)
	}
	got, err := srv.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(got.GetItems()) != pods {
		t.Fatalf("runtime holds %d sandboxes after Drain (%v), want %d", len(got.GetItems()), err, pods)
	}
}
