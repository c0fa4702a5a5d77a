package crisim_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/crisim"
)

const busybox = "busybox:1.36"

func TestSandboxAndContainerLifecycle(t *testing.T) {
	n := startNode(t, crisim.WithImage(busybox, 1<<20))
	ctx := ctxT(t)
	sb := n.runSandbox(t, "web")

	st, err := n.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY || st.Status.Metadata.Name != "web" || st.Status.Network.GetIp() == "" {
		t.Fatalf("sandbox status = %v", st.Status)
	}

	c := n.createContainer(t, sb, "app", busybox, nil)
	if s := n.containerStatus(t, c); s.State != runtimeapi.ContainerState_CONTAINER_CREATED || s.CreatedAt == 0 || s.StartedAt != 0 {
		t.Fatalf("after create: %v", s)
	}
	if _, err := n.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c}); err != nil {
		t.Fatal(err)
	}
	s := n.containerStatus(t, c)
	if s.State != runtimeapi.ContainerState_CONTAINER_RUNNING || s.StartedAt == 0 || s.ImageId == "" {
		t.Fatalf("after start: %v", s)
	}
	_, err = n.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c})
	wantCode(t, err, codes.FailedPrecondition)

	if _, err := n.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c}); err != nil {
		t.Fatal(err)
	}
	s = n.containerStatus(t, c)
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.FinishedAt < s.StartedAt || s.ExitCode != 0 || s.Reason != "Completed" {
		t.Fatalf("after stop: %v", s)
	}
	if _, err := n.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c}); err != nil {
		t.Fatal(err)
	}
	_, err = n.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c})
	wantCode(t, err, codes.NotFound)
	// Removing again succeeds, as the CRI requires.
	if _, err := n.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c}); err != nil {
		t.Fatalf("second RemoveContainer: %v", err)
	}
}

func TestStopAndRemovePodSandboxCascade(t *testing.T) {
	n := startNode(t, crisim.WithImage(busybox, 1))
	ctx := ctxT(t)
	sb := n.runSandbox(t, "pod")
	c1 := n.createContainer(t, sb, "a", busybox, nil)
	c2 := n.createContainer(t, sb, "b", busybox, map[string]string{crisim.AnnotationStopExitCode: "143"})
	for _, c := range []string{c1, c2} {
		if _, err := n.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	st, _ := n.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	if st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("sandbox state = %v, want NOTREADY", st.GetStatus().GetState())
	}
	if s := n.containerStatus(t, c1); s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 0 {
		t.Fatalf("c1 = %v", s)
	}
	if s := n.containerStatus(t, c2); s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 143 || s.Reason != "Error" {
		t.Fatalf("c2 = %v", s)
	}
	_, err := n.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("late", busybox, nil)})
	wantCode(t, err, codes.FailedPrecondition)

	if _, err := n.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	list, err := n.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(list.Containers) != 0 {
		t.Fatalf("containers after RemovePodSandbox = %v, %v", list, err)
	}
	_, err = n.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	wantCode(t, err, codes.NotFound)
	_, err = n.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
	wantCode(t, err, codes.NotFound)
	if _, err := n.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatalf("second RemovePodSandbox: %v", err)
	}
	// The name is free again.
	n.runSandbox(t, "pod")
}

func TestInvalidInput(t *testing.T) {
	n := startNode(t, crisim.WithImage(busybox, 1))
	ctx := ctxT(t)
	_, err := n.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{})
	wantCode(t, err, codes.InvalidArgument)
	_, err = n.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{}})
	wantCode(t, err, codes.InvalidArgument)
	sb := n.runSandbox(t, "p")
	_, err = n.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("p")})
	wantCode(t, err, codes.AlreadyExists)
	_, err = n.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb})
	wantCode(t, err, codes.InvalidArgument)
	_, err = n.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("c", busybox, map[string]string{crisim.AnnotationExitAfter: "soon"})})
	wantCode(t, err, codes.InvalidArgument)
	_, err = n.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("c", busybox, map[string]string{crisim.AnnotationExitCode: "x"})})
	wantCode(t, err, codes.InvalidArgument)
	_, err = n.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "nope", Config: containerConfig("c", busybox, nil)})
	wantCode(t, err, codes.NotFound)
	_, err = n.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("c", "absent:1", nil)})
	wantCode(t, err, codes.NotFound)
	n.createContainer(t, sb, "c", busybox, nil)
	_, err = n.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("c", busybox, nil)})
	wantCode(t, err, codes.AlreadyExists)
	for _, err := range []error{
		func() error {
			_, err := n.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: "nope"})
			return err
		}(),
		func() error {
			_, err := n.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: "nope"})
			return err
		}(),
		func() error {
			_, err := n.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "nope"})
			return err
		}(),
	} {
		wantCode(t, err, codes.NotFound)
	}
	_, err = n.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "nope", Cmd: []string{"true"}})
	wantCode(t, err, codes.NotFound)
	_, err = n.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "x"})
	wantCode(t, err, codes.InvalidArgument) // no command
	_, err = n.rs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "x"})
	wantCode(t, err, codes.Unimplemented) // streaming exec is not modelled
	if err := n.rt.ExitContainer("nope", 1); !errors.Is(err, crisim.ErrNotFound) {
		t.Fatalf("ExitContainer(unknown) = %v, want ErrNotFound", err)
	}
}

func TestListFilters(t *testing.T) {
	n := startNode(t, crisim.WithImage(busybox, 1))
	ctx := ctxT(t)
	sbA := n.runSandbox(t, "a")
	sbB := n.runSandbox(t, "b")
	a1 := n.createContainer(t, sbA, "a1", busybox, nil)
	n.createContainer(t, sbA, "a2", busybox, nil)
	b1 := n.createContainer(t, sbB, "b1", busybox, nil)
	if _, err := n.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: b1}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbA}); err != nil {
		t.Fatal(err)
	}

	count := func(f *runtimeapi.ContainerFilter) int {
		t.Helper()
		resp, err := n.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Containers)
	}
	running := &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	for name, tc := range map[string]struct {
		f    *runtimeapi.ContainerFilter
		want int
	}{
		"all":        {nil, 3},
		"sandbox":    {&runtimeapi.ContainerFilter{PodSandboxId: sbA}, 2},
		"sandbox-pf": {&runtimeapi.ContainerFilter{PodSandboxId: sbB[:12]}, 1},
		"id":         {&runtimeapi.ContainerFilter{Id: a1}, 1},
		"id-prefix":  {&runtimeapi.ContainerFilter{Id: a1[:10]}, 1},
		"running":    {&runtimeapi.ContainerFilter{State: running}, 1},
		"label":      {&runtimeapi.ContainerFilter{LabelSelector: map[string]string{"c": "a2"}}, 1},
		"no-match":   {&runtimeapi.ContainerFilter{LabelSelector: map[string]string{"c": "zz"}}, 0},
		"unknown-id": {&runtimeapi.ContainerFilter{Id: "ffffffff"}, 0},
	} {
		if got := count(tc.f); got != tc.want {
			t.Errorf("%s: %d containers, want %d", name, got, tc.want)
		}
	}
	ready := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	resp, err := n.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{State: ready}})
	if err != nil || len(resp.Items) != 1 || resp.Items[0].Id != sbB {
		t.Fatalf("ready sandboxes = %v, %v; want only %s", resp, err, sbB)
	}
	resp, err = n.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "a"}}})
	if err != nil || len(resp.Items) != 1 || resp.Items[0].Id != sbA {
		t.Fatalf("app=a sandboxes = %v, %v", resp, err)
	}
}

func TestScriptedExitOnFakeClock(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	n := startNode(t, crisim.WithImage(busybox, 1), crisim.WithClock(clk))
	ctx := ctxT(t)
	sb := n.runSandbox(t, "job")
	c := n.createContainer(t, sb, "job", busybox, map[string]string{
		crisim.AnnotationExitAfter: "5s",
		crisim.AnnotationExitCode:  "3",
	})
	if _, err := n.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "exit timer armed", clk.HasWaiters)
	clk.Step(4 * time.Second)
	if s := n.containerStatus(t, c); s.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after 4s: state %v, want RUNNING", s.State)
	}
	clk.Step(time.Second)
	s := n.containerStatus(t, c)
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 3 {
		t.Fatalf("after 5s: %v", s)
	}
	if got, want := time.Duration(s.FinishedAt-s.StartedAt), 5*time.Second; got != want {
		t.Fatalf("run time = %v, want %v", got, want)
	}
}

func TestExitContainer(t *testing.T) {
	n := startNode(t, crisim.WithImage(busybox, 1))
	ctx := ctxT(t)
	sb := n.runSandbox(t, "p")
	c := n.createContainer(t, sb, "c", busybox, nil)
	if err := n.rt.ExitContainer(c, 1); !errors.Is(err, crisim.ErrFailedPrecondition) {
		t.Fatalf("ExitContainer(created) = %v, want ErrFailedPrecondition", err)
	}
	if _, err := n.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c}); err != nil {
		t.Fatal(err)
	}
	if err := n.rt.ExitContainer(c, 137); err != nil {
		t.Fatal(err)
	}
	if s := n.containerStatus(t, c); s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 137 {
		t.Fatalf("after ExitContainer: %v", s)
	}
}

func TestInProcessRuntimeClose(t *testing.T) {
	rt := newRuntime(t)
	ctx := ctxT(t)
	if _, err := rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := rt.Version(ctx, &runtimeapi.VersionRequest{})
	if !errors.Is(err, crisim.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	wantCode(t, err, codes.Unavailable)
}

func TestScriptedExitTimerCancelledByStopAndClose(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	rt := newRuntime(t, crisim.WithClock(clk), crisim.WithImage(busybox, 1))
	ctx := ctxT(t)
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("p")})
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string) string {
		c, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId,
			Config: containerConfig(name, busybox, map[string]string{crisim.AnnotationExitAfter: "1m", crisim.AnnotationExitCode: "9"})})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
			t.Fatal(err)
		}
		return c.ContainerId
	}
	a := start("a")
	start("b")
	if w := clk.Waiters(); w != 2 {
		t.Fatalf("%d timers, want 2", w)
	}
	if _, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: a}); err != nil {
		t.Fatal(err)
	}
	if w := clk.Waiters(); w != 1 {
		t.Fatalf("%d timers after StopContainer, want 1", w)
	}
	clk.Step(time.Minute) // a's timer is gone: a keeps its stop exit code
	st, _ := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: a})
	if st.Status.ExitCode != 0 {
		t.Fatalf("stopped container exit code %d, want 0", st.Status.ExitCode)
	}
	start("c")
	rt.Close()
	if w := clk.Waiters(); w != 0 {
		t.Fatalf("%d timers after Close, want 0", w)
	}
}

func TestStartErrorAnnotation(t *testing.T) {
	n := startNode(t, crisim.WithImage(busybox, 1))
	ctx := ctxT(t)
	sb := n.runSandbox(t, "p")
	c := n.createContainer(t, sb, "bad", busybox, map[string]string{crisim.AnnotationStartError: "exec: \"nope\": executable file not found"})
	_, err := n.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c})
	wantCode(t, err, codes.Unknown)
	s := n.containerStatus(t, c)
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 128 || s.Reason != "StartError" || s.Message == "" {
		t.Fatalf("after failed start: %v", s)
	}
}

// WithStopExitCode is the code a stopped container reports unless its
// AnnotationStopExitCode says otherwise.
func TestWithStopExitCode(t *testing.T) {
	n := startNode(t, crisim.WithImage(busybox, 1), crisim.WithStopExitCode(137))
	ctx := ctxT(t)
	sb := n.runSandbox(t, "pod")
	def := n.createContainer(t, sb, "default", busybox, nil)
	ann := n.createContainer(t, sb, "annotated", busybox, map[string]string{crisim.AnnotationStopExitCode: "0"})
	for _, c := range []string{def, ann} {
		if _, err := n.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c}); err != nil {
			t.Fatal(err)
		}
	}
	if s := n.containerStatus(t, def); s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 137 {
		t.Fatalf("default = %v, want EXITED with code 137", s)
	}
	if s := n.containerStatus(t, ann); s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 0 {
		t.Fatalf("annotated = %v, want EXITED with code 0", s)
	}
}
