package crisim_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
)

// node is a crisim server with raw generated gRPC clients.
type node struct {
	srv *crisim.Server
	rt  *crisim.Runtime
	rs  runtimeapi.RuntimeServiceClient
	is  runtimeapi.ImageServiceClient
}

func startNode(t testing.TB, opts ...crisim.Option) *node {
	t.Helper()
	srv, err := crisim.Start(opts...)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Close()
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() {
		conn.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &node{srv: srv, rt: srv.Runtime(), rs: runtimeapi.NewRuntimeServiceClient(conn), is: runtimeapi.NewImageServiceClient(conn)}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func sandboxConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		Labels:   map[string]string{"app": name},
	}
}

func containerConfig(name, image string, ann map[string]string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: name},
		Image:       &runtimeapi.ImageSpec{Image: image},
		Labels:      map[string]string{"c": name},
		Annotations: ann,
	}
}

func (n *node) runSandbox(t testing.TB, name string) string {
	t.Helper()
	resp, err := n.rs.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(name)})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	return resp.PodSandboxId
}

func (n *node) createContainer(t testing.TB, sandboxID, name, image string, ann map[string]string) string {
	t.Helper()
	resp, err := n.rs.CreateContainer(ctxT(t), &runtimeapi.CreateContainerRequest{
		PodSandboxId:  sandboxID,
		Config:        containerConfig(name, image, ann),
		SandboxConfig: sandboxConfig("x"),
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	return resp.ContainerId
}

func (n *node) containerStatus(t testing.TB, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := n.rs.ContainerStatus(ctxT(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("ContainerStatus: %v", err)
	}
	return resp.Status
}

// events opens a GetContainerEvents stream and waits until the runtime has
// registered it.
func (n *node) events(t testing.TB, ctx context.Context) runtimeapi.RuntimeService_GetContainerEventsClient {
	t.Helper()
	before := n.rt.Subscribers()
	stream, err := n.rs.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatalf("GetContainerEvents: %v", err)
	}
	if err := n.rt.WaitSubscribers(ctx, before+1); err != nil {
		t.Fatalf("WaitSubscribers: %v", err)
	}
	return stream
}

// waitFor polls cond; it fails the test only if cond stays false for a very
// long time (not a timing assertion: a hang guard).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func wantCode(t testing.TB, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("code = %v (err %v), want %v", got, err, want)
	}
}

func recvEvent(t testing.TB, s runtimeapi.RuntimeService_GetContainerEventsClient) *runtimeapi.ContainerEventResponse {
	t.Helper()
	ev, err := s.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return ev
}

// newRuntime is crisim.New for options a test knows to be valid.
func newRuntime(t testing.TB, opts ...crisim.Option) *crisim.Runtime {
	t.Helper()
	rt, err := crisim.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}
