package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"go.uber.org/zap"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

func TestRealLowerBound(t *testing.T) {
	ms := time.Millisecond
	all := func(string) bool { return true }
	atOnce := func(int) time.Duration { return 0 }
	costs := runtimeCosts{Cores: 2, Sandbox: 100 * ms, CreateStart: 50 * ms,
		Pulls: map[string]pullCost{"x": {Time: 300 * ms}, "y": {Time: 20 * ms}}}
	one := scenario.Pod(scenario.PodOptions{Name: "a", Containers: []string{"x"}})

	t.Run("critical path: the sandbox overlaps the pull", func(t *testing.T) {
		b := realLowerBound([]*corev1.Pod{one}, all, atOnce, costs, 0)
		if b.P99 != 350*ms || b.Max != 350*ms || !strings.Contains(b.Why, "critical path p99 350ms") {
			t.Fatalf("%+v; want 350ms = max(sandbox 100, pull 300) + create+start 50", b)
		}
	})
	t.Run("init containers run in order, then the containers together", func(t *testing.T) {
		p := scenario.Pod(scenario.PodOptions{Name: "b", Init: []string{"y"}, Sidecars: []string{"y"}, Containers: []string{"y", "x"}})
		got := realLowerBound([]*corev1.Pod{p}, all, atOnce, costs, 100*ms).P99
		// sandbox 100; init started 150, run to 250; sidecar started
		// 300, when x is present too: both containers up at 350.
		if got != 350*ms {
			t.Fatalf("bound %v, want 350ms", got)
		}
	})
	t.Run("the cores' work bounds a burst", func(t *testing.T) {
		c := costs
		c.SandboxCPU, c.CreateStartCPU = 100*ms, 100*ms
		pods := []*corev1.Pod{one, one, one, one}
		b := realLowerBound(pods, all, atOnce, c, 0)
		p99, p50 := b.P99, b.P50
		// 4 x 200ms of CPU on 2 cores: the last pod is not up before
		// 400ms; the second of four not before half of it, under the
		// critical path.
		if p99 != 400*ms || p50 != 350*ms {
			t.Fatalf("p99 %v, p50 %v; want 400ms and 350ms", p99, p50)
		}
	})
	t.Run("a later pod waits only for the rest of a pull", func(t *testing.T) {
		pods := []*corev1.Pod{one, one}
		arrival := func(i int) time.Duration { return time.Duration(i) * time.Second }
		only := func(string) bool { return false }
		pmax := realLowerBound(pods, only, arrival, costs, 0).Max
		if pmax != 0 {
			t.Fatalf("no pod measured: bound %v", pmax)
		}
		second := pods[1].DeepCopy()
		second.Name = "late"
		pods[1] = second
		pmax = realLowerBound(pods, func(k string) bool { return k == "default/late" }, arrival, costs, 0).Max
		if pmax != 150*ms {
			t.Fatalf("the pod arriving after its image: bound %v, want sandbox + create+start = 150ms", pmax)
		}
	})
	t.Run("the bytes over the bandwidth", func(t *testing.T) {
		c := costs
		// The best rate seen is the largest image's: 200 MB in 1 s.
		c.Pulls = map[string]pullCost{"y": {Time: 10 * ms, Bytes: 100e6}}
		p := scenario.Pod(scenario.PodOptions{Name: "b", Containers: []string{"x", "y"}})
		c.Pulls["x"] = pullCost{Time: time.Second, Bytes: 200e6}
		b := realLowerBound([]*corev1.Pod{p}, all, atOnce, c, 0)
		got, why := b.P99, b.Why
		if got != 1550*ms || !strings.Contains(why, "200 MB/s") {
			t.Fatalf("bound %v (%s), want 300 MB at 200 MB/s + 50ms = 1.55s", got, why)
		}
	})
}

// The cost probe makes its sandboxes and containers one at a time, reads
// the node's CPU around each call, and leaves nothing behind.
func TestMeasureStartCosts(t *testing.T) {
	srv, err := crisim.Start(burst(0.01, 1).Runtime.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt, is := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	// A fake CPU that spends 10ms between any two reads.
	var mu sync.Mutex
	var busy time.Duration
	cpu := func() (time.Duration, time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		busy += 10 * time.Millisecond
		return busy, 2 * busy, nil
	}
	const image = "registry.sim/init:1"
	probe := costProbe{
		Sandbox: func(i int) *runtimeapi.PodSandboxConfig {
			return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprint("p", i), Uid: fmt.Sprint("u", i), Namespace: "bench"}}
		},
		Container: func(i int) *runtimeapi.ContainerConfig {
			return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: image}}
		},
		Image: image, N: 3,
	}
	ctx := context.Background()
	c, err := measureStartCosts(ctx, rt, is, cpu, probe)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sandbox <= 0 || c.CreateStart <= 0 || c.SandboxCPU != 10*time.Millisecond || c.CreateStartCPU != 10*time.Millisecond {
		t.Fatalf("%+v: want positive latencies and 10ms of CPU per op", c)
	}
	if got := srv.Runtime().Calls("RunPodSandbox"); got != 3 {
		t.Errorf("%d sandboxes made, want 3", got)
	}
	left, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d sandboxes left", len(left.Items))
	}
	if _, err := is.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		t.Fatal(err)
	}
	pulls, err := measurePulls(ctx, is, cpu, []string{image})
	if err != nil {
		t.Fatal(err)
	}
	if p := pulls[image]; p.Time <= 0 || p.CPU != 10*time.Millisecond || p.Bytes == 0 {
		t.Errorf("pull %+v: want a time, 10ms of CPU and the image's size", p)
	}
	probe.N = 0
	if _, err := measureStartCosts(ctx, rt, is, cpu, probe); err == nil {
		t.Error("a probe of no sandboxes was measured")
	}
	if _, err := measurePulls(ctx, is, cpu, []string{"registry.sim/absent:1"}); err == nil {
		t.Error("an image the registry lacks was measured")
	}
}

// A shim is told its containerd's address after -address.
func TestShimOf(t *testing.T) {
	cmd := []byte("/bin/containerd-shim-runc-v2\x00-namespace\x00k8s.io\x00-id\x00abc\x00-address\x00/tmp/n/containerd.sock\x00")
	if !shimOf(cmd, "/tmp/n/containerd.sock") {
		t.Error("the node's shim not recognized")
	}
	if shimOf(cmd, "/run/containerd/containerd.sock") || shimOf([]byte("-address\x00"), "") {
		t.Error("another containerd's shim taken for the node's")
	}
}

// A run that times out says which measured pods the agent had not seen
// running, with its report of each, and its PLEG's figures.
func TestTimedOutRunNamesUnseenPods(t *testing.T) {
	sc := burst(0.05, 2)
	r, err := runScenario(context.Background(), sc, agent.ModeSyncPod, runConfig{scale: 0.05, timeout: time.Nanosecond, log: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || len(r.Unseen) != 3 || !strings.HasPrefix(r.Unseen[0], "default/burst-0") || !strings.HasPrefix(r.Unseen[2], "PLEG: ") {
		t.Fatalf("timed out %v, unseen %q: want both pods and the PLEG's figures", r.TimedOut, r.Unseen)
	}
}
