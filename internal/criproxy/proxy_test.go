package criproxy_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/internal/criproxy"
)

// Unary calls, their errors and the event stream pass through unchanged,
// and every call is counted once under its method.
func TestProxyForwardsAndCounts(t *testing.T) {
	srv, err := crisim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p, err := criproxy.Start(filepath.Join(t.TempDir(), "cri.sock"), srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	conn, err := grpc.NewClient(p.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	events, err := rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName == "" {
		t.Fatalf("Version through the proxy: %v, %v", v, err)
	}
	_, err = rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{})
	if status.Code(err) == codes.OK || status.Code(err) == codes.Unknown {
		t.Fatalf("StopPodSandbox with no ID: got %v, want the backend's own status code", err)
	}
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "u1"}}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.Recv()
	if err != nil {
		t.Fatalf("event stream through the proxy: %v", err)
	}
	if ev.PodSandboxStatus.GetId() != sb.PodSandboxId && ev.ContainerId != sb.PodSandboxId {
		t.Errorf("event %+v is not about sandbox %s", ev, sb.PodSandboxId)
	}
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("ListPodSandbox: %v, %v", list, err)
	}

	const svc = "/runtime.v1.RuntimeService/"
	want := map[string]int{svc + "GetContainerEvents": 1, svc + "Version": 1, svc + "StopPodSandbox": 1,
		svc + "RunPodSandbox": 1, svc + "ListPodSandbox": 1}
	got := p.Counts()
	for m, n := range want {
		if got[m] != n {
			t.Errorf("%s counted %d times, want %d (all: %v)", m, got[m], n, got)
		}
	}
	if p.Total() != 5 {
		t.Errorf("Total = %d, want 5", p.Total())
	}
	cancel()
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStartRefusesEmptyArguments(t *testing.T) {
	if _, err := criproxy.Start("", "unix:///x"); err == nil {
		t.Error("Start with no socket path: no error")
	}
	if _, err := criproxy.Start(filepath.Join(t.TempDir(), "s"), ""); err == nil {
		t.Error("Start with no backend: no error")
	}
}
