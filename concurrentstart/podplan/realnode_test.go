package podplan_test

import (
	"context"
	"testing"
	"time"

	cs "github.com/syncpod/syncpod/concurrentstart"
	"github.com/syncpod/syncpod/concurrentstart/podplan"
	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/internal/testnode"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestRealNodePodPlanOrder starts a pod of 1 init container, 2 sidecars
// (the second with a startup check) and 3 regular containers through a
// podplan against real containerd, and checks the order from containerd's
// own timestamps: each sidecar created after its predecessor finished or
// started, the regular containers after the last sidecar started.
func TestRealNodePodPlanOrder(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "concurrentstart/app", testnode.WithSize(1<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := criclient.Dial(ctx, n.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	sb := n.SandboxConfig("ordered", "uid-ordered")
	if _, err := cli.PullImage(ctx, &runtimeapi.ImageSpec{Image: img}, nil, sb); err != nil {
		t.Fatal(err)
	}
	podID, err := cli.RunPodSandbox(ctx, sb, "")
	if err != nil {
		t.Fatal(err)
	}

	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ordered"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "init", Image: img, Args: []string{"sleep", "300ms", "exit", "0"}},
			{Name: "sidecar-a", Image: img, RestartPolicy: &always},
			{Name: "sidecar-b", Image: img, RestartPolicy: &always},
		},
		Containers: []corev1.Container{{Name: "app-1", Image: img}, {Name: "app-2", Image: img}, {Name: "app-3", Image: img}},
	}}
	p := &criPod{rs: cli.CRI(), podID: podID, sb: sb, poll: 20 * time.Millisecond,
		config: func(c podplan.Container) *runtimeapi.ContainerConfig {
			args := c.Spec.Args
			if len(args) == 0 {
				args = []string{"pause"}
			}
			return n.ContainerConfig(c.Name, c.Spec.Image, args...)
		}}
	f := p.funcs()
	// sidecar-b's startup check: containerd reports it running.
	f.HasStartupCheck = func(c podplan.Container) bool { return c.Name == "sidecar-b" }
	var checked []string
	f.WaitStartup = func(ctx context.Context, c podplan.Container) error {
		checked = append(checked, c.Name)
		for {
			st, err := cli.ContainerStatus(ctx, p.id(c.Name), false)
			if err != nil {
				return err
			}
			if st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	nodes, err := podplan.Build(pod, f)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cs.New(nodes, cs.WithMaxParallel(8))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := plan.Run(ctx)
	if err != nil {
		t.Fatalf("run: %v (%+v)", err, rep.Results)
	}
	if len(checked) != 1 || checked[0] != "sidecar-b" {
		t.Fatalf("startup checks ran for %v, want [sidecar-b]", checked)
	}

	status := map[string]*runtimeapi.ContainerStatus{}
	for _, name := range []string{"init", "sidecar-a", "sidecar-b", "app-1", "app-2", "app-3"} {
		st, err := cli.ContainerStatus(ctx, p.id(name), false)
		if err != nil {
			t.Fatalf("status %s: %v", name, err)
		}
		status[name] = st.GetStatus()
	}
	if s := status["init"]; s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 0 {
		t.Fatalf("init: %v exit %d", s.State, s.ExitCode)
	}
	after := func(later, what string, earlierAt int64, earlier string) {
		t.Helper()
		if c := status[later].CreatedAt; c < earlierAt {
			t.Errorf("%s created at %d, before %s %s at %d", later, c, earlier, what, earlierAt)
		}
	}
	after("sidecar-a", "finished", status["init"].FinishedAt, "init")
	after("sidecar-b", "started", status["sidecar-a"].StartedAt, "sidecar-a")
	for _, app := range []string{"app-1", "app-2", "app-3"} {
		after(app, "started", status["sidecar-b"].StartedAt, "sidecar-b")
		if s := status[app]; s.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("%s: %v", app, s.State)
		}
	}
	for _, name := range []string{"sidecar-a", "sidecar-b"} {
		if s := status[name]; s.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("%s: %v", name, s.State)
		}
	}
}
