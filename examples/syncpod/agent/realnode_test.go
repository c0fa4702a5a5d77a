package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
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
			c, err := criclient.Dial(ctx, n.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			a, err := agent.New(c.CRI(), c.CRI(), agent.WithMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				a.Stop()
				_ = a.Cleanup(ctx)
			}()

			dir := t.TempDir()
			var manifest string
			for i := 0; i < 3; i++ {
				manifest += fmt.Sprintf(`---
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
			if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			src := agent.NewManifestDir(dir, a.Apply, agent.WithManifestErrors(func(err error) { t.Errorf("manifest: %v", err) }))
			sctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- src.Run(sctx) }()
			defer func() {
				cancel()
				<-done
			}()

			waitFor(t, "pods running on containerd", allRunning(a, 3))
			cs, err := c.ListContainers(ctx, &runtimeapi.ContainerFilter{
				State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
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
				sbs, err := c.ListPodSandbox(ctx, nil)
				return err == nil && len(sbs) == 0 && a.Snapshot().Total == 0
			})
			_ = time.Second
		})
	}
}
