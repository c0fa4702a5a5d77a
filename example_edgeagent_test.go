package syncpod_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/concurrentstart"
	"github.com/syncpod/syncpod/concurrentstart/podplan"
	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/criclient/podcri"
	"github.com/syncpod/syncpod/pleg"
	"github.com/syncpod/syncpod/podworkers"
	"github.com/syncpod/syncpod/statecache"
)

// Example_edgeAgent is an edge agent on the library alone: three pods, each
// with an init container, a sidecar and two app containers. Their images
// come from the pull scheduler, their containers start as a plan, their
// status is read from the cache the PLEG keeps, and the pod workers that
// sync them are woken by the PLEG and the puller.
func Example_edgeAgent() {
	check := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	ctx := context.Background()
	srv, err := crisim.Start(crisim.WithRegistryImage("docker.io/library/app:1", 10<<20))
	check(err)
	defer srv.Close()
	rt, err := criclient.Dial(ctx, srv.Endpoint())
	check(err)
	defer rt.Close()
	cache := statecache.New[types.UID, *pleg.PodStatus]()
	gen, err := pleg.New(rt, cache)
	check(err)
	defer gen.Close() // after the workers close: it ends the Watch loop below
	check(gen.Start(ctx))
	var workers *podworkers.Workers
	pulls, err := asyncpull.New(rt, asyncpull.WithNotify(func(uid types.UID) { workers.Wake(uid) }))
	check(err)
	defer pulls.Close()

	var state sync.Map // pod UID -> "started", then "reported"
	running := make(chan string, 3)
	syncPod := func(ctx context.Context, _ podworkers.UpdateType, pod *corev1.Pod) (podworkers.Result, error) {
		// The pull outlives this call; pulls.Cancel(uid) or Close ends it.
		img := pulls.Ensure(context.WithoutCancel(ctx), asyncpull.Request{Image: "app:1", PodUID: pod.UID})
		if img.State != asyncpull.StatePresent {
			return podworkers.Result{}, img.Err // nil while pulling: the scheduler wakes the pod
		}
		if _, started := state.Load(pod.UID); !started {
			var sandbox string
			sbConfig, err := podcri.SandboxConfig(pod)
			if err == nil {
				sandbox, err = rt.RunPodSandbox(ctx, sbConfig, "")
			}
			if err != nil {
				return podworkers.Result{}, err
			}
			var ids sync.Map // container name -> id
			start := func(ctx context.Context, c podplan.Container) error {
				cfg, err := podcri.ContainerConfig(pod, c.Spec, podcri.WithImageRef(img.ImageRef))
				if err != nil {
					return err
				}
				if c.Role == podplan.Init { // the simulated init container exits 0 at once
					cfg.Annotations[crisim.AnnotationExitAfter] = "0s"
				}
				id, err := rt.CreateContainer(ctx, sandbox, cfg, sbConfig)
				if err == nil { // the PLEG's events then wake the pod
					ids.Store(c.Name, id)
					err = rt.StartContainer(ctx, id)
				}
				return err
			}
			waitExit0 := func(ctx context.Context, c podplan.Container) error {
				id, _ := ids.Load(c.Name)
				st, err := gen.WaitContainerState(ctx, pod.UID, id.(string), runtimeapi.ContainerState_CONTAINER_EXITED)
				if err == nil && st.GetExitCode() != 0 {
					err = fmt.Errorf("%s exited %d", c.Name, st.GetExitCode())
				}
				return err
			}
			nodes, err := podplan.Build(pod, podplan.Funcs{Start: start, WaitCompleted: waitExit0})
			if err != nil {
				return podworkers.Result{}, err
			}
			plan, err := concurrentstart.New(nodes)
			if err != nil {
				return podworkers.Result{}, err
			}
			if _, err := plan.Run(ctx); err != nil {
				return podworkers.Result{}, err // retried after the pod's back-off
			}
			state.Store(pod.UID, "started")
		}
		// The PLEG wakes the pod when its containers change; report the pod
		// once the cache shows the sidecar and both app containers running.
		var up []string
		if st, _ := cache.Get(pod.UID); st != nil {
			for _, c := range st.ContainerStatuses {
				if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
					up = append(up, c.GetMetadata().GetName())
				}
			}
		}
		if sort.Strings(up); len(up) == 3 && state.CompareAndSwap(pod.UID, "started", "reported") {
			running <- fmt.Sprintf("%s: Running %s", pod.Name, strings.Join(up, " "))
		}
		return podworkers.Result{}, nil
	}
	// Nothing to stop in the termination phases: these pods are never deleted.
	workers, err = podworkers.New(podworkers.Funcs{Sync: syncPod})
	check(err)
	defer workers.Close()
	go func() {
		for ev := range gen.Watch() {
			workers.Wake(ev.ID)
		}
	}()
	always := corev1.ContainerRestartPolicyAlways
	for i := range 3 {
		name := fmt.Sprintf("edge-%d", i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", Image: "app:1"}, {Name: "proxy", Image: "app:1", RestartPolicy: &always}},
				Containers:     []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "metrics", Image: "app:1"}},
			}}
		check(workers.Update(podworkers.PodUpdate{Type: podworkers.UpdateCreate, Pod: pod}))
	}
	lines := []string{<-running, <-running, <-running}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// edge-0: Running app metrics proxy
	// edge-1: Running app metrics proxy
	// edge-2: Running app metrics proxy
}
