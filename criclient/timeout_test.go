package criclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestTimeoutFires(t *testing.T) {
	srv := startSim(t)
	c := dial(t, srv, criclient.WithMethodTimeout("ListContainers", 20*time.Millisecond))
	srv.Runtime().HangNext("ListContainers", 1)
	_, err := c.ListContainers(context.Background(), nil)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("code = %v (%v), want DeadlineExceeded", status.Code(err), err)
	}
	if !errors.Is(err, criclient.ErrTimeout) {
		t.Fatalf("%v does not match ErrTimeout", err)
	}
	var ce *criclient.CallError
	if !errors.As(err, &ce) || ce.Method != "ListContainers" || !ce.Timeout() {
		t.Fatalf("CallError = %#v", ce)
	}
	// The next call is not hung and succeeds within the same timeout.
	if _, err := c.ListContainers(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

func TestCallerDeadlineIsNotClientTimeout(t *testing.T) {
	srv := startSim(t)
	c := dial(t, srv)
	srv.Runtime().HangNext("Status", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Status(ctx, false)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("code = %v (%v)", status.Code(err), err)
	}
	if errors.Is(err, criclient.ErrTimeout) {
		t.Fatal("the caller's own deadline was reported as the client's timeout")
	}
}

// deadlineRecorder is a unary client interceptor that records how far in the
// future each method's deadline is (0: none).
type deadlineRecorder struct {
	got map[string]time.Duration
}

func (d *deadlineRecorder) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if dl, ok := ctx.Deadline(); ok {
		d.got[method] = time.Until(dl)
	} else {
		d.got[method] = 0
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func TestDefaultTimeoutsAreTheKubelets(t *testing.T) {
	srv := startSim(t)
	rec := &deadlineRecorder{got: map[string]time.Duration{}}
	c := dial(t, srv, criclient.WithDialOptions(grpc.WithUnaryInterceptor(rec.intercept)))
	ctx := context.Background()
	if _, err := c.RunPodSandbox(ctx, sandboxConfig("p"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: testImage}, nil, nil); err != nil {
		t.Fatal(err)
	}
	_, _, _ = c.ExecSync(ctx, "none", []string{"true"}, 0)
	_, _, _ = c.ExecSync(ctx, "none", []string{"true"}, 10*time.Second)
	_ = c.StopContainer(ctx, "none", 30)

	const svc = "/runtime.v1.RuntimeService/"
	// Deadlines are recorded a moment after they are set: compare with a
	// generous lower margin, these are configuration checks.
	within := func(got, want time.Duration) bool { return got <= want && got > want-time.Minute }
	if got := rec.got[svc+"Version"]; !within(got, criclient.DefaultTimeout) {
		t.Errorf("Version deadline in %v, want %v", got, criclient.DefaultTimeout)
	}
	if got := rec.got[svc+"RunPodSandbox"]; !within(got, 4*time.Minute) {
		t.Errorf("RunPodSandbox deadline in %v, want 4m", got)
	}
	if got, ok := rec.got["/runtime.v1.ImageService/PullImage"]; !ok || got != 0 {
		t.Errorf("PullImage deadline in %v (seen %v), want none", got, ok)
	}
	if got := rec.got[svc+"StopContainer"]; !within(got, 2*time.Minute+30*time.Second) {
		t.Errorf("StopContainer deadline in %v, want 2m30s", got)
	}
	if got := rec.got[svc+"ExecSync"]; !within(got, 2*time.Minute+10*time.Second) {
		t.Errorf("ExecSync(10s) deadline in %v, want 2m10s", got)
	}
}

func TestExecSyncWithoutTimeoutHasNoDeadline(t *testing.T) {
	srv := startSim(t)
	rec := &deadlineRecorder{got: map[string]time.Duration{}}
	c := dial(t, srv, criclient.WithDialOptions(grpc.WithUnaryInterceptor(rec.intercept)))
	_, _, _ = c.ExecSync(context.Background(), "none", []string{"true"}, 0)
	if got, ok := rec.got["/runtime.v1.RuntimeService/ExecSync"]; !ok || got != 0 {
		t.Fatalf("ExecSync(0) deadline in %v (seen %v), want none", got, ok)
	}
}

func TestMethodTimeoutOverride(t *testing.T) {
	srv := startSim(t)
	rec := &deadlineRecorder{got: map[string]time.Duration{}}
	c := dial(t, srv,
		criclient.WithTimeout(10*time.Second),
		criclient.WithMethodTimeout("PullImage", time.Minute),
		criclient.WithMethodTimeout("Status", 0),
		criclient.WithDialOptions(grpc.WithUnaryInterceptor(rec.intercept)))
	ctx := context.Background()
	if _, err := c.RunPodSandbox(ctx, sandboxConfig("p"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: testImage}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(ctx, false); err != nil {
		t.Fatal(err)
	}
	within := func(got, want time.Duration) bool { return got <= want && got > want/2 }
	if got := rec.got["/runtime.v1.RuntimeService/RunPodSandbox"]; !within(got, 20*time.Second) {
		t.Errorf("RunPodSandbox deadline in %v, want twice the base (20s)", got)
	}
	if got := rec.got["/runtime.v1.ImageService/PullImage"]; !within(got, time.Minute) {
		t.Errorf("PullImage deadline in %v, want 1m", got)
	}
	if got, ok := rec.got["/runtime.v1.RuntimeService/Status"]; !ok || got != 0 {
		t.Errorf("Status deadline in %v, want none", got)
	}
}
