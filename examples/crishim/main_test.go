package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRejectsUnknownAsyncMethod(t *testing.T) {
	if err := run([]string{"--async", "StartContainer"}); err == nil || !strings.Contains(err.Error(), "only RunPodSandbox") {
		t.Fatalf("run --async StartContainer: %v", err)
	}
}

// The command serves on a 0660 socket, answers /healthz, and drains and
// returns on SIGTERM.
func TestServeAndDrainOnSIGTERM(t *testing.T) {
	srv, err := crisim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sock := filepath.Join(t.TempDir(), "run", "crishim.sock")
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	healthAddr := hl.Addr().String()
	_ = hl.Close()
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--listen", "unix://" + sock, "--runtime-endpoint", srv.Endpoint(),
			"--health-listen", healthAddr, "--async", "RunPodSandbox", "--drain-timeout", "5s"})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("socket never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	fi, _ := os.Stat(sock)
	if fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %o, want 660", fi.Mode().Perm())
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var body string
	for time.Now().Before(deadline) {
		resp, err := hc.Get("http://" + healthAddr + "/healthz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %q", body)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}
}

// failingListener fails every Accept, as a listener whose socket broke.
type failingListener struct{ err error }

func (l failingListener) Accept() (net.Conn, error) { return nil, l.err }
func (l failingListener) Close() error              { return nil }
func (l failingListener) Addr() net.Addr            { return &net.UnixAddr{Name: "broken", Net: "unix"} }

// When the CRI server fails, serve returns its error at once, without
// draining, and only after the health server stopped.
func TestServeFailureStopsHealth(t *testing.T) {
	hs, err := startHealth("127.0.0.1:0", http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	errAccept := errors.New("accept failed")
	drain := func(context.Context) error { t.Error("drained after the server failed"); return nil }
	err = serve(context.Background(), grpc.NewServer(), failingListener{errAccept}, hs, drain, time.Second, zap.NewNop())
	if !errors.Is(err, errAccept) {
		t.Errorf("serve: %v, want the Accept error", err)
	}
	select {
	case <-hs.done:
	default:
		t.Error("health server still serving after serve returned")
	}
	if c, err := net.Dial("tcp", hs.addr.String()); err == nil {
		_ = c.Close()
		t.Error("health port still accepts connections")
	}
}

// A --health-listen address in use is reported, with nothing left running.
func TestHealthListenInUse(t *testing.T) {
	srv, err := crisim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	sock := filepath.Join(t.TempDir(), "crishim.sock")
	err = run([]string{"--listen", "unix://" + sock, "--runtime-endpoint", srv.Endpoint(), "--health-listen", busy.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "--health-listen") {
		t.Fatalf("run with a busy health address: %v", err)
	}
}
