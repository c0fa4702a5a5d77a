package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/manifest"
	"github.com/syncpod/syncpod/internal/testnode"
)

// On real containerd: pods with an init container, a sidecar and regular
// containers, read from a manifest directory, reach Running in both modes;
// deleting the manifest removes them from the runtime.
func TestRealNodeManifestPodsRunAndGo(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "syncpod/app", testnode.WithSize(4<<20))
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			ctx := context.Background()
			a := startRealAgent(t, n, nil, agent.WithMode(mode))

			dir := t.TempDir()
			var manifests string
			for i := 0; i < 3; i++ {
				manifests += fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: real-%s-%d}
spec:
  initContainers:
  - {name: setup, image: %q, command: [/workload], args: [sleep, 100ms, exit, "0"]}
  - {name: proxy, image: %q, restartPolicy: Always}
  containers:
  - {name: app, image: %q}
  - {name: worker, image: %q, args: [pause]}
`, mode, i, img, img, img, img)
			}
			file := filepath.Join(dir, "pods.yaml")
			if err := os.WriteFile(file, []byte(manifests), 0o644); err != nil {
				t.Fatal(err)
			}
			src := manifest.NewDir(dir, a.Apply, manifest.WithErrors(func(err error) { t.Errorf("manifest: %v", err) }))
			sctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- src.Run(sctx) }()
			defer func() {
				cancel()
				<-done
			}()

			waitFor(t, "pods running on containerd", allRunning(a, 3))
			cs, err := listRunning(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != 9 { // proxy, app, worker per pod; setup has exited
				t.Errorf("%d running containers, want 9", len(cs))
			}

			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "pods removed from containerd", func() bool {
				sbs, err := n.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
				return err == nil && len(sbs.GetItems()) == 0 && a.Snapshot().Total == 0
			})
		})
	}
}

// startRealAgent starts an agent on n's containerd, its runtime service
// wrapped by wrap when given; the test's cleanup stops it and removes its
// pods.
func startRealAgent(t *testing.T, n *testnode.Node, wrap func(cri.RuntimeService) cri.RuntimeService, opts ...agent.Option) *agent.Agent {
	t.Helper()
	c, err := criclient.Dial(context.Background(), n.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var rt cri.RuntimeService = c.CRI()
	if wrap != nil {
		rt = wrap(rt)
	}
	a, err := agent.New(rt, c.CRI(), opts...)
	if err != nil {
		_ = c.Close()
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		_ = c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := a.Cleanup(ctx); err != nil {
			t.Logf("Cleanup: %v", err)
		}
		_ = c.Close()
	})
	return a
}

func listRunning(ctx context.Context, n *testnode.Node) ([]*runtimeapi.Container, error) {
	resp, err := n.RuntimeService().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	return resp.GetContainers(), err
}
