package crisim_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/crisim"
)

func (n *node) startedContainer(t testing.TB, name string) string {
	t.Helper()
	sb := n.runSandbox(t, "exec-"+name)
	id := n.createContainer(t, sb, name, busybox, nil)
	if _, err := n.rs.StartContainer(ctxT(t), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return id
}

// ExecSync in a running container exits 0 by default; a handler plays the
// command (output, exit code) over gRPC, sees the container and the
// command, and every call is counted.
func TestExecSyncRunsTheHandler(t *testing.T) {
	n := startNode(t, crisim.WithImage(busybox, 1))
	ctx := ctxT(t)
	id := n.startedContainer(t, "app")
	resp, err := n.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"true"}})
	if err != nil || resp.ExitCode != 0 || len(resp.Stdout) != 0 {
		t.Fatalf("default ExecSync = %v, %v; want exit 0, no output", resp, err)
	}
	var gotID string
	var gotCmd []string
	n.rt.SetExecHandler(func(_ context.Context, id string, cmd []string) ([]byte, []byte, int32, error) {
		gotID, gotCmd = id, cmd
		return []byte("out"), []byte("err"), 3, nil
	})
	resp, err = n.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"cat", "/ready"}, Timeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ExitCode != 3 || string(resp.Stdout) != "out" || string(resp.Stderr) != "err" {
		t.Fatalf("ExecSync = %v, want exit 3, out, err", resp)
	}
	if gotID != id || !slices.Equal(gotCmd, []string{"cat", "/ready"}) {
		t.Fatalf("handler got %q %q", gotID, gotCmd)
	}
	n.rt.SetExecHandler(func(context.Context, string, []string) ([]byte, []byte, int32, error) {
		return nil, nil, 0, status.Error(codes.Internal, "runc exec failed")
	})
	_, err = n.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"x"}})
	wantCode(t, err, codes.Internal)
	n.rt.SetExecHandler(func(context.Context, string, []string) ([]byte, []byte, int32, error) {
		return nil, nil, 0, errors.New("plain failure")
	})
	_, err = n.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"x"}})
	wantCode(t, err, codes.Unknown)
	n.rt.SetExecHandler(nil)
	if resp, err := n.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"x"}}); err != nil || resp.ExitCode != 0 {
		t.Fatalf("after SetExecHandler(nil): %v, %v; want the default exit 0", resp, err)
	}
	if got := n.rt.Calls("ExecSync"); got != 5 {
		t.Fatalf("Calls(ExecSync) = %d, want 5", got)
	}
}

// Only a running container can exec: a created or exited one gives
// FailedPrecondition, an unknown one NotFound, and the handler is not run.
func TestExecSyncNeedsARunningContainer(t *testing.T) {
	n := startNode(t, crisim.WithImage(busybox, 1))
	ctx := ctxT(t)
	ran := false
	n.rt.SetExecHandler(func(context.Context, string, []string) ([]byte, []byte, int32, error) {
		ran = true
		return nil, nil, 0, nil
	})
	sb := n.runSandbox(t, "p")
	created := n.createContainer(t, sb, "created", busybox, nil)
	_, err := n.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: created, Cmd: []string{"true"}})
	wantCode(t, err, codes.FailedPrecondition)
	exited := n.startedContainer(t, "exited")
	if err := n.rt.ExitContainer(exited, 1); err != nil {
		t.Fatal(err)
	}
	_, err = n.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: exited, Cmd: []string{"true"}})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = n.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "unknown", Cmd: []string{"true"}})
	wantCode(t, err, codes.NotFound)
	_, err = n.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: exited, Cmd: []string{"true"}, Timeout: -1})
	wantCode(t, err, codes.InvalidArgument)
	if ran {
		t.Fatal("the handler ran for a container that is not running")
	}
}

// A command that outlives the request's timeout on the runtime clock is
// ended (its ctx is cancelled) and the call gives DeadlineExceeded; one
// that returns in time is not affected by the timeout.
func TestExecSyncTimeout(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	rt := newRuntime(t, crisim.WithClock(clk), crisim.WithImage(busybox, 1))
	t.Cleanup(func() { _ = rt.Close() })
	ctx := ctxT(t)
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("p")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: containerConfig("c", busybox, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 1)
	ended := make(chan error, 1)
	rt.SetExecHandler(func(ctx context.Context, _ string, _ []string) ([]byte, []byte, int32, error) {
		entered <- struct{}{}
		<-ctx.Done() // a command that hangs
		ended <- ctx.Err()
		return nil, nil, 0, nil
	})
	res := make(chan error, 1)
	go func() {
		_, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: c.ContainerId, Cmd: []string{"sleep", "inf"}, Timeout: 2})
		res <- err
	}()
	<-entered
	clk.Step(1999 * time.Millisecond)
	select {
	case err := <-res:
		t.Fatalf("ExecSync returned %v before its timeout", err)
	default:
	}
	clk.Step(time.Millisecond)
	err = <-res
	wantCode(t, err, codes.DeadlineExceeded)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want it to match context.DeadlineExceeded", err)
	}
	if e := <-ended; !errors.Is(e, context.Canceled) {
		t.Fatalf("the command's ctx ended with %v, want Canceled", e)
	}

	rt.SetExecHandler(func(context.Context, string, []string) ([]byte, []byte, int32, error) {
		return []byte("ok"), nil, 0, nil
	})
	resp, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: c.ContainerId, Cmd: []string{"true"}, Timeout: 1})
	if err != nil || string(resp.Stdout) != "ok" {
		t.Fatalf("ExecSync = %v, %v", resp, err)
	}
}
