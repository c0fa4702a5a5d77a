package statecache_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/statecache"
)

type PodStatus struct {
	Phase string
}

func ExampleCache() {
	c := statecache.New[string, *PodStatus]()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	c.Set("pod-a", &PodStatus{Phase: "Running"}, nil, t0.Add(2*time.Second))
	// A slower relist that read the pod earlier cannot overwrite it.
	updated := c.Set("pod-a", &PodStatus{Phase: "Pending"}, nil, t0.Add(time.Second))
	st, _ := c.Get("pod-a")
	fmt.Println(updated, st.Phase)

	missing, err := c.Get("pod-b")
	fmt.Println(missing == nil, err)
	// Output:
	// false Running
	// true <nil>
}

func ExampleCache_GetNewerThan() {
	c := statecache.New[string, *PodStatus]()
	lastSync := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	done := make(chan struct{})
	go func() {
		defer close(done)
		// A pod worker waits for a status newer than its last sync.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st, err := c.GetNewerThan(ctx, "pod-a", lastSync)
		fmt.Println(st.Phase, err)
	}()

	// The relister records what it saw, then that the relist is complete.
	relist := lastSync.Add(time.Second)
	c.Set("pod-a", &PodStatus{Phase: "Running"}, nil, relist)
	c.UpdateTime(relist)
	<-done
	// Output:
	// Running <nil>
}

// A virtual-kubelet provider's GetPods lists every cached pod. Range visits
// entries in no particular order, so sort for stable output.
func ExampleCache_Range() {
	c := statecache.New[string, *PodStatus]()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.Set("pod-b", &PodStatus{Phase: "Pending"}, nil, t0)
	c.Set("pod-a", &PodStatus{Phase: "Running"}, nil, t0)
	c.Set("pod-c", &PodStatus{Phase: "Running"}, nil, t0)
	c.Delete("pod-c")

	var pods []string
	c.Range(func(uid string, st *PodStatus, err error, modified time.Time) bool {
		pods = append(pods, uid+" "+st.Phase)
		return true // false stops the walk
	})
	slices.Sort(pods)
	fmt.Println(c.Len(), pods)
	// Output:
	// 2 [pod-a Running pod-b Pending]
}

func ExampleMemo() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lookups := 0
	cgroupOf, err := statecache.NewMemo(func(ctx context.Context, podUID string) (string, error) {
		lookups++ // a slow walk of /sys/fs/cgroup in real life
		return "/kubepods.slice/pod" + podUID, nil
	}, statecache.WithTTL(time.Minute), statecache.WithClock(clk))
	if err != nil {
		panic(err)
	}
	defer cgroupOf.Close()

	ctx := context.Background()
	p, _ := cgroupOf.Get(ctx, "1234")
	_, _ = cgroupOf.Get(ctx, "1234")
	fmt.Println(p, lookups)

	clk.Step(2 * time.Minute)
	_, _ = cgroupOf.Get(ctx, "1234")
	fmt.Println(lookups)
	// Output:
	// /kubepods.slice/pod1234 1
	// 2
}

// A pod's cleanup waits until the relister has seen the pod go and deleted
// its status.
func ExampleCache_WaitDeleted() {
	c := statecache.New[string, *PodStatus]()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.Set("pod-a", &PodStatus{Phase: "Running"}, nil, t0)

	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		fmt.Println("deleted:", c.WaitDeleted(ctx, "pod-a"))
	}()

	// The relister no longer finds the pod in the runtime.
	c.Delete("pod-a")
	<-done
	// Output:
	// deleted: <nil>
}

// A reader of the cache's changes, with its own bounded buffer.
func ExampleCache_Subscribe() {
	c := statecache.New[string, *PodStatus]()
	sub, err := c.Subscribe(16)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sub.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.Set("pod-a", &PodStatus{Phase: "Running"}, nil, t0)
	c.Delete("pod-a")
	for range 2 {
		ch := <-sub.Events()
		fmt.Println(ch.Key, ch.Deleted)
	}
	// Output:
	// pod-a false
	// pod-a true
}
