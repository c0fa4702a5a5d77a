package criclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/syncpod/syncpod/criclient"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// TestEveryMethodCallsItsRPC calls every Client method once and checks that
// it sent the RPC of the same name, and that a failure names the method.
func TestEveryMethodCallsItsRPC(t *testing.T) {
	srv := startSim(t)
	var last string
	record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		last = method
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c := dial(t, srv, criclient.WithDialOptions(grpc.WithUnaryInterceptor(record)))
	ctx := context.Background()
	img := &runtimeapi.ImageSpec{Image: testImage}
	calls := map[string]func() error{
		"Version":             func() error { _, err := c.Version(ctx, "v1"); return err },
		"Status":              func() error { _, err := c.Status(ctx, false); return err },
		"RuntimeConfig":       func() error { _, err := c.RuntimeConfig(ctx); return err },
		"UpdateRuntimeConfig": func() error { return c.UpdateRuntimeConfig(ctx, &runtimeapi.RuntimeConfig{}) },
		"RunPodSandbox":       func() error { _, err := c.RunPodSandbox(ctx, sandboxConfig("m"), ""); return err },
		"StopPodSandbox":      func() error { return c.StopPodSandbox(ctx, "x") },
		"RemovePodSandbox":    func() error { return c.RemovePodSandbox(ctx, "x") },
		"PodSandboxStatus":    func() error { _, err := c.PodSandboxStatus(ctx, "x", false); return err },
		"ListPodSandbox":      func() error { _, err := c.ListPodSandbox(ctx, nil); return err },
		"PortForward":         func() error { _, err := c.PortForward(ctx, &runtimeapi.PortForwardRequest{}); return err },
		"UpdatePodSandboxResources": func() error {
			_, err := c.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{})
			return err
		},
		"CheckpointPod": func() error { return c.CheckpointPod(ctx, &runtimeapi.CheckpointPodRequest{}) },
		"RestorePod":    func() error { _, err := c.RestorePod(ctx, &runtimeapi.RestorePodRequest{}); return err },
		"CreateContainer": func() error {
			_, err := c.CreateContainer(ctx, "x", containerConfig("m"), sandboxConfig("m"))
			return err
		},
		"StartContainer":           func() error { return c.StartContainer(ctx, "x") },
		"StopContainer":            func() error { return c.StopContainer(ctx, "x", 1) },
		"RemoveContainer":          func() error { return c.RemoveContainer(ctx, "x") },
		"ListContainers":           func() error { _, err := c.ListContainers(ctx, nil); return err },
		"ContainerStatus":          func() error { _, err := c.ContainerStatus(ctx, "x", false); return err },
		"UpdateContainerResources": func() error { return c.UpdateContainerResources(ctx, "x", &runtimeapi.ContainerResources{}) },
		"ExecSync":                 func() error { _, _, err := c.ExecSync(ctx, "x", []string{"true"}, 0); return err },
		"Exec":                     func() error { _, err := c.Exec(ctx, &runtimeapi.ExecRequest{}); return err },
		"Attach":                   func() error { _, err := c.Attach(ctx, &runtimeapi.AttachRequest{}); return err },
		"ReopenContainerLog":       func() error { return c.ReopenContainerLog(ctx, "x") },
		"CheckpointContainer":      func() error { return c.CheckpointContainer(ctx, &runtimeapi.CheckpointContainerRequest{}) },
		"ContainerStats":           func() error { _, err := c.ContainerStats(ctx, "x"); return err },
		"ListContainerStats":       func() error { _, err := c.ListContainerStats(ctx, nil); return err },
		"PodSandboxStats":          func() error { _, err := c.PodSandboxStats(ctx, "x"); return err },
		"ListPodSandboxStats":      func() error { _, err := c.ListPodSandboxStats(ctx, nil); return err },
		"ListMetricDescriptors":    func() error { _, err := c.ListMetricDescriptors(ctx); return err },
		"ListPodSandboxMetrics":    func() error { _, err := c.ListPodSandboxMetrics(ctx); return err },
		"ListImages":               func() error { _, err := c.ListImages(ctx, nil); return err },
		"ImageStatus":              func() error { _, err := c.ImageStatus(ctx, img, false); return err },
		"PullImage":                func() error { _, err := c.PullImage(ctx, img, nil, nil); return err },
		"RemoveImage":              func() error { return c.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "absent:1"}) },
		"ImageFsInfo":              func() error { _, err := c.ImageFsInfo(ctx); return err },
	}
	for name, call := range calls {
		if _, ok := criclient.MethodClass(name); !ok {
			t.Errorf("MethodClass(%q) unknown", name)
		}
		last = ""
		err := call()
		if !strings.HasSuffix(last, "/"+name) {
			t.Errorf("%s sent %q", name, last)
		}
		var ce *criclient.CallError
		if err != nil && (!errors.As(err, &ce) || ce.Method != name) {
			t.Errorf("%s: error %v does not name the method", name, err)
		}
	}
	if _, ok := criclient.MethodClass("Nope"); ok {
		t.Error("MethodClass knows a method that does not exist")
	}
}

func TestExecSyncExitCode(t *testing.T) {
	c, err := criclient.Dial(context.Background(), startStub(t, "stub"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stdout, stderr, err := c.ExecSync(context.Background(), "ctr", []string{"false"}, 0)
	var exitErr utilexec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 3 {
		t.Fatalf("ExecSync = %v, want an exec.ExitError with status 3", err)
	}
	if string(stdout) != "out" || string(stderr) != "err" {
		t.Fatalf("ExecSync output %q / %q", stdout, stderr)
	}
}
