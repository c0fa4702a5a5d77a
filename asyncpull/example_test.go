package asyncpull_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	critest "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/asyncpull"
)

// A pod worker asks for its image, returns at once, and is woken when the pull is done.
func Example() {
	runtime := critest.NewFakeImageService() // any ImageManagerService: criclient.Client, ...
	woken := make(chan types.UID, 1)
	s, err := asyncpull.New(runtime, asyncpull.WithNotify(func(uid types.UID) { woken <- uid }))
	if err != nil {
		panic(err) // a nil service or an option out of range
	}
	defer s.Close()

	req := asyncpull.Request{Image: "nginx", PodUID: "pod-1"}
	fmt.Println(s.Ensure(context.Background(), req).State) // never blocks

	uid := <-woken // the pod worker's queue would re-sync this pod
	res := s.Ensure(context.Background(), req)
	fmt.Println(uid, res.State, res.Image)
	// Output:
	// Queued
	// pod-1 Present docker.io/library/nginx:latest
}

// Requests for one image share one PullImage, whatever the spelling of the reference.
func ExampleScheduler_Wait() {
	runtime := critest.NewFakeImageService()
	s, err := asyncpull.New(runtime)
	if err != nil {
		panic(err) // a nil service or an option out of range
	}
	defer s.Close()

	ctx := context.Background()
	s.Ensure(ctx, asyncpull.Request{Image: "docker.io/library/redis:latest", PodUID: "a"})
	res, err := s.Wait(ctx, asyncpull.Request{Image: "redis", PodUID: "b"})
	fmt.Println(res.State, err)

	pulls := 0
	for _, c := range runtime.Called {
		if c == "PullImage" {
			pulls++
		}
	}
	fmt.Println("PullImage calls:", pulls)
	// Output:
	// Present <nil>
	// PullImage calls: 1
}

// Invalid references fail at once with the kubelet's reason and a typed error.
func ExampleScheduler_Ensure_invalidImageName() {
	s, err := asyncpull.New(critest.NewFakeImageService())
	if err != nil {
		panic(err) // a nil service or an option out of range
	}
	defer s.Close()

	res := s.Ensure(context.Background(), asyncpull.Request{Image: "Not A Reference", PodUID: "p"})
	fmt.Println(res.State, res.Reason)
	// Output:
	// Failed InvalidImageName
}

// Subscribe gives a pod worker a capacity-one wake-up channel.
func ExampleScheduler_Subscribe() {
	s, err := asyncpull.New(critest.NewFakeImageService())
	if err != nil {
		panic(err) // a nil service or an option out of range
	}
	defer s.Close()

	sub, err := s.Subscribe("pod-1")
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	req := asyncpull.Request{Image: "busybox:1.36", PodUID: "pod-1"}
	s.Ensure(context.Background(), req)
	<-sub.Events()
	fmt.Println(s.Ensure(context.Background(), req).State)
	// Output:
	// Present
}

// A progress line or a metrics exporter reads Stats: one consistent snapshot, cheap enough to
// take on every scrape.
func ExampleScheduler_Stats() {
	runtime := critest.NewFakeImageService()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := asyncpull.New(runtime, asyncpull.WithClock(clk))
	if err != nil {
		panic(err) // a nil service or an option out of range
	}
	defer s.Close()
	ctx := context.Background()

	_, _ = s.Wait(ctx, asyncpull.Request{Image: "nginx", PodUID: "pod-1"})
	runtime.InjectError("PullImage", errors.New("manifest unknown"))
	_, _ = s.Wait(ctx, asyncpull.Request{Image: "registry.example/missing:v1", PodUID: "pod-2"})

	st := s.Stats()
	fmt.Printf("queued %d, pulling %d, pods waiting %d, images in back-off %d\n",
		st.Queued+st.Checking, st.Running, st.PodsWaiting, st.ImagesInBackOff)
	fmt.Printf("pulls: %d started, %d succeeded, %d failed\n", st.PullsStarted, st.PullsSucceeded, st.PullsFailed)
	// Output:
	// queued 0, pulling 0, pods waiting 0, images in back-off 1
	// pulls: 2 started, 1 succeeded, 1 failed
}
