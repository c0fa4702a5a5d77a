package shim_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/crishim/shim"
)

// served is a shim in front of a backend, served on its own socket.
type served struct {
	shim   *shim.Shim
	socket string
	rt     runtimeapi.RuntimeServiceClient
	img    runtimeapi.ImageServiceClient
	stop   func()
}

func startCrisim(t testing.TB, opts ...crisim.Option) *crisim.Server {
	t.Helper()
	srv, err := crisim.Start(append([]crisim.Option{crisim.WithImage("busybox:1.36", 1<<20)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// serve starts a shim for backend on a socket in a temp dir; extra dial
// options shape the test's client connection.
func serve(t testing.TB, backend string, cfg shim.Config, dial ...grpc.DialOption) *served {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := shim.New(ctx, backend, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "crishim.sock")
	l, err := shim.Listen("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	s.Register(gs)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(l) }()
	conn, err := grpc.NewClient("unix://"+sock, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dial...)...)
	if err != nil {
		t.Fatal(err)
	}
	sv := &served{shim: s, socket: sock, rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn)}
	stopped := false
	sv.stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = s.Drain(context.Background())
		_ = conn.Close()
		gs.Stop()
		<-done
		_ = s.Close()
	}
	t.Cleanup(sv.stop)
	return sv
}

func sandboxConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		Labels:   map[string]string{"app": name},
	}
}

func containerConfig(name string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "busybox:1.36"},
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 10ms until it holds or 20s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ownSubscribers is the number of view subscriptions the shim holds itself:
// the statuses it answers reads from follow the view's events. A client's
// GetContainerEvents stream is one more.
const ownSubscribers = 1

// waitFor polls cond every 500 ms until it holds, failing t with cond's
// last note after timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, note := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s:\n%s", timeout, what, note)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// runtimeUnresponsive says whether st reports RuntimeReady false with the
// shim's reason for a runtime that does not answer.
func runtimeUnresponsive(st *runtimeapi.StatusResponse) bool {
	for _, c := range st.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady {
			return !c.GetStatus() && c.GetReason() == "RuntimeUnresponsive"
		}
	}
	return false
}
