package syncpod_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/concurrentstart"
	"github.com/syncpod/syncpod/concurrentstart/podplan"
	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/pleg"
	"github.com/syncpod/syncpod/statecache"
)

// The README's "How the pieces compose" is the code between the markers
// below, dedented by one tab: TestREADMESketch fails when the two differ,
// and runs the code on a simulated runtime.

// readme:begin

// node wires the packages once per node.
type node struct {
	rt    *criclient.Client
	cache *statecache.Cache[types.UID, *pleg.PodStatus]
	gen   *pleg.PLEG
	pulls *asyncpull.Scheduler
}

// newNode connects to the runtime; wake puts a pod on its worker's queue.
func newNode(ctx context.Context, endpoint string, wake func(types.UID)) (*node, error) {
	rt, err := criclient.Dial(ctx, endpoint,
		criclient.WithListSnapshots(500*time.Millisecond)) // Lists never queue behind a burst
	if err != nil {
		return nil, err
	}
	n := &node{rt: rt, cache: statecache.New[types.UID, *pleg.PodStatus]()}
	if n.gen, err = pleg.New(rt, n.cache); err != nil { // evented, relist fallback
		return nil, err
	}
	if err := n.gen.Start(ctx); err != nil {
		return nil, err
	}
	go func() { // PLEG events wake the pod's worker; no worker ever waits here
		for ev := range n.gen.Watch() {
			wake(ev.ID)
		}
	}()
	n.pulls, err = asyncpull.New(rt, asyncpull.WithNotify(wake)) // and so does a finished pull
	return n, err
}

// syncPod is one sync of p in its worker. It never waits for a pull:
// false with no error means "not yet", and a wake-up will come.
func (n *node) syncPod(ctx context.Context, p *corev1.Pod) (bool, error) {
	if st, _ := n.cache.Get(p.UID); st != nil && len(st.SandboxStatuses) > 0 {
		return true, nil // started; examples/syncpod computes restarts and deletions here
	}
	// Every image of the pod, init containers' too, asked for at once.
	all := append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	images := map[string]string{} // image -> the runtime's reference
	waiting := false
	for _, c := range all {
		r := n.pulls.Ensure(ctx, asyncpull.Request{Image: c.Image, PodUID: p.UID})
		switch r.State {
		case asyncpull.StatePresent:
			images[c.Image] = r.ImageRef
		case asyncpull.StateFailed, asyncpull.StateBackOff: // ErrImagePull, ImagePullBackOff
			return false, fmt.Errorf("%s: %w", r.Reason, r.Err)
		default:
			waiting = true // queued or pulling: the others still get asked for
		}
	}
	if waiting {
		return false, nil
	}
	sbConfig := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{
		Name: p.Name, Namespace: p.Namespace, Uid: string(p.UID)}}
	sandbox, err := n.rt.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		return false, err
	}
	var ids sync.Map // container name -> id
	start := func(ctx context.Context, c podplan.Container) error {
		id, err := n.rt.CreateContainer(ctx, sandbox, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: c.Name},
			Image:    &runtimeapi.ImageSpec{Image: images[c.Spec.Image]},
			Command:  c.Spec.Command, Args: c.Spec.Args, Annotations: p.Annotations,
		}, sbConfig)
		if err != nil {
			return err
		}
		ids.Store(c.Name, id)
		return n.rt.StartContainer(ctx, id)
	}
	waitExit0 := func(ctx context.Context, c podplan.Container) error { // fed by the PLEG
		id, _ := ids.Load(c.Name)
		for seen := (time.Time{}); ; {
			st, err := n.cache.GetNewerThan(ctx, p.UID, seen)
			if err != nil {
				return err
			}
			if st == nil { // not seen by the PLEG yet: wait past its last relist
				g, _ := n.cache.GlobalTime()
				seen = g.Add(time.Nanosecond)
				continue
			}
			for _, cs := range st.ContainerStatuses {
				if cs.Id == id && cs.State == runtimeapi.ContainerState_CONTAINER_EXITED {
					if cs.ExitCode != 0 {
						return fmt.Errorf("init container %s exited %d", c.Name, cs.ExitCode)
					}
					return nil
				}
			}
			seen = st.Timestamp.Add(time.Nanosecond)
		}
	}
	nodes, err := podplan.Build(p, podplan.Funcs{Start: start, WaitCompleted: waitExit0})
	if err != nil {
		return false, err // a cycle in the start-after annotation, an unknown container
	}
	plan, err := concurrentstart.New(nodes, concurrentstart.WithMaxParallel(8))
	if err != nil {
		return false, err
	}
	_, err = plan.Run(ctx) // init containers in order, then every other container at once
	return err == nil, err
}

// readme:end

// The README shows the sketch above, and the sketch runs two pods (an init
// container and two regular containers each, images pulled on demand) to
// completion on a simulated runtime, driven only by its wake-ups.
func TestREADMESketch(t *testing.T) {
	src, err := os.ReadFile("readme_sketch_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(src), "// readme:begin\n\n")
	code, _, _ := strings.Cut(after, "\n// readme:end")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(readme), "## How the pieces compose\n")
	_, block, _ = strings.Cut(block, "```go\n")
	block, _, _ = strings.Cut(block, "```")
	if strings.TrimSpace(block) != strings.TrimSpace(code) {
		t.Fatalf("README.md's \"How the pieces compose\" differs from readme_sketch_test.go's sketch; paste this into README.md:\n%s", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := crisim.Start(crisim.WithRegistryImage("docker.io/library/app:1", 10<<20),
		crisim.WithRegistryImage("docker.io/library/migrate:1", 5<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	wakes := make(chan types.UID, 256)
	wake := func(uid types.UID) {
		select {
		case wakes <- uid:
		default: // a wake-up is pending anyway
		}
	}
	n, err := newNode(ctx, srv.Endpoint(), wake)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = n.pulls.Close()
		_ = n.gen.Close()
		_ = n.rt.Close()
	}()

	pods := map[types.UID]*corev1.Pod{}
	for _, name := range []string{"web", "api"} {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
				// The simulated containers exit 0 after 50 ms.
				Annotations: map[string]string{crisim.AnnotationExitAfter: "50ms"}},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "migrate", Image: "migrate:1"}},
				Containers:     []corev1.Container{{Name: "server", Image: "app:1"}, {Name: "metrics", Image: "app:1"}},
			},
		}
		p.Spec.Containers[0].Command = []string{"serve"}
		pods[p.UID] = p
		wake(p.UID)
	}
	done := map[types.UID]bool{}
	for started := 0; started < len(pods); {
		var uid types.UID
		select {
		case uid = <-wakes:
		case <-ctx.Done():
			t.Fatalf("pods not started: %d of %d done", started, len(pods))
		}
		p, ok := pods[uid]
		if !ok || done[uid] {
			continue
		}
		ok, err := n.syncPod(ctx, p)
		if err != nil {
			t.Fatalf("sync %s: %v", p.Name, err)
		}
		if ok {
			done[uid] = true
			started++
		}
	}
	// Every container ran, and each pod's init container had exited 0
	// before its regular containers started.
	for uid, p := range pods {
		cs, err := n.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
			LabelSelector: nil, PodSandboxId: sandboxOf(ctx, t, n, uid)})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 3 {
			t.Fatalf("%s: %d containers, want 3", p.Name, len(cs))
		}
		var initDone int64
		var regularStarts []int64
		for _, c := range cs {
			st, err := n.rt.ContainerStatus(ctx, c.Id, false)
			if err != nil {
				t.Fatal(err)
			}
			s := st.GetStatus()
			if s.Metadata.Name == "migrate" {
				if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 0 {
					t.Fatalf("%s: init container %v exit %d", p.Name, s.State, s.ExitCode)
				}
				initDone = s.FinishedAt
			} else {
				regularStarts = append(regularStarts, s.StartedAt)
			}
		}
		for _, started := range regularStarts {
			if started == 0 || started < initDone {
				t.Fatalf("%s: a regular container started at %d, before its init container finished at %d", p.Name, started, initDone)
			}
		}
	}
}

func sandboxOf(ctx context.Context, t *testing.T, n *node, uid types.UID) string {
	t.Helper()
	sbs, err := n.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if sb.Metadata.Uid == string(uid) {
			return sb.Id
		}
	}
	t.Fatalf("no sandbox for %s", uid)
	return ""
}
