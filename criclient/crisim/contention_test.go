package crisim_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/crisim"
)

// neverWithin polls cond for a while and fails if it ever holds.
func neverWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			t.Fatalf("%s", what)
		}
	}
}

func listSandboxes(t *testing.T, n *node, out chan<- int) {
	resp, err := n.rs.ListPodSandbox(ctxT(t), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Error(err)
		out <- -1
		return
	}
	out <- len(resp.Items)
}

// A slow mutation does not hold up other calls unless the store lock is on:
// latency is slept outside the state lock.
func TestLatencyDoesNotSerialiseCalls(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	n := startNode(t, crisim.WithClock(clk), crisim.WithLatency("RunPodSandbox", crisim.Fixed(10*time.Second)))
	done := make(chan string, 1)
	go func() { done <- n.runSandbox(t, "slow") }()
	waitFor(t, "RunPodSandbox sleeping", func() bool { return clk.Waiters() == 1 })
	lists := make(chan int, 1)
	listSandboxes(t, n, lists)
	if got := <-lists; got != 0 {
		t.Fatalf("List during a slow RunPodSandbox saw %d sandboxes, want 0", got)
	}
	clk.Step(10 * time.Second)
	<-done
}

func TestStoreLockListsQueueBehindMutations(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	n := startNode(t,
		crisim.WithClock(clk),
		crisim.WithStoreLock(),
		crisim.WithLatency("RunPodSandbox", crisim.Fixed(10*time.Second)),
	)
	// Two mutations share the store: both sleep at once.
	m := make(chan string, 3)
	go func() { m <- n.runSandbox(t, "m1") }()
	go func() { m <- n.runSandbox(t, "m2") }()
	waitFor(t, "two mutations sleeping together", func() bool { return clk.Waiters() == 2 })

	// Status calls do not take the store lock.
	if _, err := n.rs.Status(ctxT(t), &runtimeapi.StatusRequest{}); err != nil {
		t.Fatal(err)
	}
	// A List arriving now waits for both.
	lists := make(chan int, 1)
	go listSandboxes(t, n, lists)
	waitFor(t, "List in flight", func() bool { return n.rt.InFlight("ListPodSandbox") == 1 })
	// A mutation arriving after the List queues behind the List.
	go func() { m <- n.runSandbox(t, "m3") }()
	waitFor(t, "m3 in flight", func() bool { return n.rt.InFlight("RunPodSandbox") == 3 })
	neverWithin(t, 50*time.Millisecond, "List returned while mutations held the store", func() bool { return len(lists) > 0 })
	if w := clk.Waiters(); w != 2 {
		t.Fatalf("%d calls sleeping, want 2 (m3 must wait for the List)", w)
	}

	clk.Step(10 * time.Second)
	if got := <-lists; got != 2 {
		t.Fatalf("List saw %d sandboxes, want 2: it must run after m1 and m2 and before m3", got)
	}
	<-m
	<-m
	waitFor(t, "m3 sleeping", func() bool { return clk.Waiters() == 1 })
	clk.Step(10 * time.Second)
	<-m
}

func TestStoreLockListGivesUpOnContext(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	n := startNode(t, crisim.WithClock(clk), crisim.WithStoreLock(), crisim.WithLatency("CreateContainer", crisim.Fixed(time.Minute)))
	n.rt.AddImage(busybox, 1)
	sb := n.runSandbox(t, "p")
	go n.rs.CreateContainer(ctxT(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("c", busybox, nil)})
	waitFor(t, "CreateContainer sleeping", func() bool { return clk.Waiters() == 1 })
	ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Millisecond)
	defer cancel()
	_, err := n.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	wantCode(t, err, 4) // DeadlineExceeded
	// The abandoned waiter does not block later Lists once the store is free.
	clk.Step(time.Minute)
	waitFor(t, "CreateContainer done", func() bool { return n.rt.InFlight("CreateContainer") == 0 })
	if _, err := n.rs.ListContainers(ctxT(t), &runtimeapi.ListContainersRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestMaxConcurrency(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	const limit, callers = 3, 8
	n := startNode(t, crisim.WithClock(clk), crisim.WithMaxConcurrency(limit), crisim.WithLatency("Version", crisim.Fixed(time.Second)))
	done := make(chan error, callers)
	for range callers {
		go func() { done <- version(ctxT(t), n) }()
	}
	waitFor(t, "all callers in", func() bool { return n.rt.InFlight("Version") == callers && clk.Waiters() == limit })
	neverWithin(t, 50*time.Millisecond, "more calls than the cap are working", func() bool { return clk.Waiters() > limit })
	finished := 0
	for finished < callers {
		clk.Step(time.Second)
		want := min(limit, callers-finished)
		for range want {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			finished++
		}
		if finished < callers {
			waitFor(t, "next batch working", func() bool { return clk.Waiters() == min(limit, callers-finished) })
		}
	}
	if got := n.rt.MaxInFlight("Version"); got != callers {
		t.Fatalf("MaxInFlight = %d, want %d (waiting calls are in flight)", got, callers)
	}
}

func TestLatencyDistributions(t *testing.T) {
	rng := func() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
	if d := crisim.Fixed(3 * time.Millisecond).Sample(rng()); d != 3*time.Millisecond {
		t.Fatalf("Fixed = %v", d)
	}
	u := crisim.Uniform(10*time.Millisecond, 20*time.Millisecond)
	r := rng()
	for range 1000 {
		if d := u.Sample(r); d < 10*time.Millisecond || d > 20*time.Millisecond {
			t.Fatalf("Uniform sample %v out of range", d)
		}
	}
	ln := crisim.LogNormal(10*time.Millisecond, 50*time.Millisecond)
	r1, r2 := rng(), rng()
	var samples []time.Duration
	for range 10000 {
		a, b := ln.Sample(r1), ln.Sample(r2)
		if a != b {
			t.Fatal("same seed, different samples")
		}
		samples = append(samples, a)
	}
	below := func(x time.Duration) float64 {
		n := 0
		for _, s := range samples {
			if s <= x {
				n++
			}
		}
		return float64(n) / float64(len(samples))
	}
	if f := below(10 * time.Millisecond); f < 0.47 || f > 0.53 {
		t.Fatalf("P(<= median) = %.3f, want ~0.5", f)
	}
	if f := below(50 * time.Millisecond); f < 0.985 || f > 0.995 {
		t.Fatalf("P(<= p99) = %.3f, want ~0.99", f)
	}
	for m, l := range crisim.RealisticLatencies() {
		if d := l.Sample(rng()); d <= 0 || d > time.Second {
			t.Errorf("realistic %s latency %v", m, d)
		}
	}
}
