package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/manifest"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

const manifestV1 = `apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations:
    crisim.syncpod.io/exit-after.migrate: 10ms
spec:
  initContainers:
  - {name: migrate, image: registry.sim/app-0:1}
  - {name: proxy, image: registry.sim/app-1:1, restartPolicy: Always}
  containers:
  - {name: app, image: registry.sim/app-0:1}
---
apiVersion: v1
kind: Pod
metadata: {name: other}
spec:
  containers: [{name: app, image: registry.sim/app-1:1}]
`

// Adding, changing and deleting manifest files creates, updates and kills
// pods; a broken file is reported and does not disturb other pods.
func TestManifestDirAddChangeDelete(t *testing.T) {
	rt := scenario.DefaultRuntime(testScale)
	rt.Images = scenario.Images("app", 3, 1e6)
	n := startSim(t, rt.Options()...)
	ev := &events{}
	a := startAgent(t, n, agent.WithTimeScale(testScale), agent.WithEventHook(ev.hook))

	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		tmp := filepath.Join(dir, "."+name+".tmp") // hidden: ignored until renamed
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var errs []error
	src := manifest.NewDir(dir, a.Apply, manifest.WithDebounce(20*time.Millisecond),
		manifest.WithErrors(func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	write("web.yaml", manifestV1)
	waitFor(t, "both pods running", allRunning(a, 2))

	// A broken file: reported, and the running pods carry on.
	write("broken.yaml", "metadata: {name: x}\nspec: {containers: [{name: a, image: 'Bad::Ref'}]}\n")
	waitFor(t, "manifest error", func() bool { mu.Lock(); defer mu.Unlock(); return len(errs) > 0 })
	if s := a.Snapshot(); s.Total != 2 {
		t.Errorf("%d pods after a broken file, want 2", s.Total)
	}

	// Change the app container's image: it is replaced, the others stay.
	// The file now holds only web, with a new image for app.
	v2 := strings.Replace(strings.Split(manifestV1, "---")[0],
		"- {name: app, image: registry.sim/app-0:1}", "- {name: app, image: registry.sim/app-2:1}", 1)
	write("web.yaml", v2)
	waitFor(t, "app replaced by one on the new image", func() bool {
		cs, err := n.client.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err != nil {
			return false
		}
		apps := 0
		for _, c := range cs {
			if c.Metadata.Name == "app" && c.Labels["io.kubernetes.pod.name"] == "web" {
				if !strings.Contains(c.Image.GetImage(), "app-2") {
					return false
				}
				apps++
			}
		}
		return apps == 1
	})
	waitFor(t, "web running again", func() bool { return podState(a, "web").State == agent.PodRunning })
	waitFor(t, "other pod gone (no longer in the file)", func() bool { return podState(a, "other").Name == "" })
	if got := len(ev.find(func(e agent.Event) bool { return e.Type == agent.EventSandbox && e.Pod == "default/web" })); got != 1 {
		t.Errorf("web got %d sandboxes, want 1: a container change does not recreate the pod", got)
	}

	// Delete the file: the pod is killed and removed from the runtime.
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pods removed", func() bool {
		sbs, err := n.client.ListPodSandbox(context.Background(), nil)
		return err == nil && len(sbs) == 0 && a.Snapshot().Total == 0
	})
}

// Sync may be called while Run runs: the two never race on what was
// applied, apply is never called concurrently, and each pod is added once.
func TestManifestDirSyncDuringRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(manifestV1), 0o644); err != nil {
		t.Fatal(err)
	}
	var inApply atomic.Int32
	var mu sync.Mutex
	adds := map[string]int{}
	apply := func(u agent.PodUpdate) {
		if inApply.Add(1) != 1 {
			t.Error("apply called concurrently")
		}
		defer inApply.Add(-1)
		if u.Op == agent.OpAdd {
			mu.Lock()
			adds[u.Pod.Name]++
			mu.Unlock()
		}
	}
	src := manifest.NewDir(dir, apply)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := src.Sync(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if adds["web"] != 1 || adds["other"] != 1 || len(adds) != 2 {
		t.Errorf("adds = %v, want web and other once each", adds)
	}
}
