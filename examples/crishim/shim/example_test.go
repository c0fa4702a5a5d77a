package shim_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/crishim/shim"
)

// Example puts the shim between a CRI client and a simulated runtime: the
// client talks to the shim's socket exactly as it would to containerd's, and
// its List calls after a RunPodSandbox see the new sandbox (read-your-writes)
// without waiting for the runtime.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	backend, err := crisim.Start()
	if err != nil {
		panic(err)
	}
	defer backend.Close()

	s, err := shim.New(ctx, backend.Endpoint(), shim.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	dir, err := os.MkdirTemp("", "crishim-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "crishim.sock")
	l, err := shim.Listen("unix://" + sock)
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	s.Register(srv)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	defer func() { srv.Stop(); <-served }()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)

	_, err = rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-web"}}})
	if err != nil {
		panic(err)
	}
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		panic(err)
	}
	for _, sb := range list.GetItems() {
		fmt.Println(sb.GetMetadata().GetName(), sb.GetState())
	}
	// Output:
	// web SANDBOX_READY
}
