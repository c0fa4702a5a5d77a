package syncpod_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
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

// Example composes the packages into one pod sync on a simulated runtime:
// the image is pulled by the scheduler (the worker waits on its subscription,
// not on the pull), the sandbox is created, and the containers start as a
// plan: the init container first, then both regular containers at once. The
// PLEG keeps the status cache fresh from the runtime's event stream.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	srv, err := crisim.Start(crisim.WithRegistryImage("docker.io/library/app:1", 10<<20))
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rt, err := criclient.Dial(ctx, srv.Endpoint(), criclient.WithListSnapshots(200*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer rt.Close()

	cache := statecache.New[types.UID, *pleg.PodStatus]()
	gen, err := pleg.New(rt, cache)
	if err != nil {
		panic(err)
	}
	if err := gen.Start(ctx); err != nil {
		panic(err)
	}
	defer gen.Close()

	pulls, err := asyncpull.New(rt)
	if err != nil {
		panic(err)
	}
	defer pulls.Close()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "migrate", Image: "app:1"}},
			Containers:     []corev1.Container{{Name: "server", Image: "app:1"}, {Name: "metrics", Image: "app:1"}},
		},
	}

	// The pod worker: ask for the image, and sleep on the subscription until
	// the scheduler says a result is ready.
	sub, err := pulls.Subscribe(pod.UID)
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	req := asyncpull.Request{Image: "app:1", PodUID: pod.UID}
	res := pulls.Ensure(ctx, req)
	for res.State != asyncpull.StatePresent {
		select {
		case <-sub.Events():
		case <-ctx.Done():
			panic(ctx.Err())
		}
		res = pulls.Ensure(ctx, req)
	}
	fmt.Println("image:", res.Image)

	sandboxConfig := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{
		Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)}}
	sandboxID, err := rt.RunPodSandbox(ctx, sandboxConfig, "")
	if err != nil {
		panic(err)
	}

	var ids sync.Map // container name -> id; the regular containers start concurrently
	start := func(ctx context.Context, c podplan.Container) error {
		id, err := rt.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: c.Name},
			Image:    &runtimeapi.ImageSpec{Image: res.ImageRef},
			Annotations: map[string]string{ // the simulated init container exits 0 at once
				crisim.AnnotationExitAfter: exitAfter(c.Role)},
		}, sandboxConfig)
		if err != nil {
			return err
		}
		ids.Store(c.Name, id)
		return rt.StartContainer(ctx, id)
	}
	waitExit0 := func(ctx context.Context, c podplan.Container) error {
		for {
			id, _ := ids.Load(c.Name)
			st, err := rt.ContainerStatus(ctx, id.(string), false)
			if err != nil {
				return err
			}
			if s := st.GetStatus(); s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
				if s.GetExitCode() != 0 {
					return fmt.Errorf("%s exited %d", c.Name, s.GetExitCode())
				}
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	nodes, err := podplan.Build(pod, podplan.Funcs{Start: start, WaitCompleted: waitExit0})
	if err != nil {
		panic(err)
	}
	plan, err := concurrentstart.New(nodes, concurrentstart.WithMaxParallel(8))
	if err != nil {
		panic(err)
	}
	report, err := plan.Run(ctx)
	if err != nil {
		panic(err)
	}
	names := make([]string, 0, len(report.Results))
	for _, r := range report.Results {
		names = append(names, fmt.Sprintf("%s: %v", r.Name, r.Outcome))
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Println(n)
	}

	// The PLEG feeds the cache from the runtime's events: each GetNewerThan
	// blocks until the pod's status is newer than the one already seen.
	var status *pleg.PodStatus
	var seen time.Time
	for !allStarted(status) {
		if status, err = cache.GetNewerThan(ctx, pod.UID, seen); err != nil {
			panic(err)
		}
		seen = status.Timestamp
	}
	fmt.Println("cached containers:", len(status.ContainerStatuses))
	// Output:
	// image: docker.io/library/app:1
	// metrics: Succeeded
	// migrate: Succeeded
	// server: Succeeded
	// cached containers: 3
}

// allStarted reports whether all three containers of the example pod have
// started (the init container has exited since).
func allStarted(st *pleg.PodStatus) bool {
	if st == nil || len(st.ContainerStatuses) < 3 {
		return false
	}
	for _, c := range st.ContainerStatuses {
		if c.GetStartedAt() == 0 {
			return false
		}
	}
	return true
}

func exitAfter(role podplan.Role) string {
	if role == podplan.Init {
		return "0s"
	}
	return "1h"
}
