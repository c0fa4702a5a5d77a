package criclient_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stubRuntime is the smallest CRI server: Version answers, everything else
// is Unimplemented. It tests Dial and endpoints without a simulated runtime.
type stubRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	name string
}

func (s *stubRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: s.name, RuntimeApiVersion: "v1"}, nil
}

func (s *stubRuntime) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{Timestamp: int64(len(s.name))}}}, nil
}

func (s *stubRuntime) ExecSync(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	return &runtimeapi.ExecSyncResponse{Stdout: []byte("out"), Stderr: []byte("err"), ExitCode: 3}, nil
}

// startStub serves a stubRuntime on a fresh unix socket and returns its path.
func startStub(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stub.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	stub := &stubRuntime{name: name}
	runtimeapi.RegisterRuntimeServiceServer(srv, stub)
	runtimeapi.RegisterImageServiceServer(srv, stub)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return path
}
