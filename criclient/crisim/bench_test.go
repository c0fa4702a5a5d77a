package crisim_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
)

// latencies collects per-call durations and reports percentiles.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	q := func(p float64) float64 {
		return float64(l.d[int(p*float64(len(l.d)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkRawCall measures crisim's own cost per call over gRPC with no
// modelled latency: the floor under every benchmark that uses it.
func BenchmarkRawCall(b *testing.B) {
	for _, tc := range []struct {
		name       string
		containers int
		call       func(ctx context.Context, n *node, id string) error
	}{
		{"Version", 0, func(ctx context.Context, n *node, _ string) error {
			_, err := n.rs.Version(ctx, &runtimeapi.VersionRequest{})
			return err
		}},
		{"ContainerStatus", 1, func(ctx context.Context, n *node, id string) error {
			_, err := n.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
			return err
		}},
		{"ListContainers/100", 100, func(ctx context.Context, n *node, _ string) error {
			_, err := n.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			return err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			n := startNode(b, crisim.WithImage(busybox, 1))
			var id string
			if tc.containers > 0 {
				sb := n.runSandbox(b, "p")
				for i := range tc.containers {
					id = n.createContainer(b, sb, fmt.Sprint("c", i), busybox, nil)
				}
			}
			ctx := context.Background()
			var lat latencies
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					start := time.Now()
					if err := tc.call(ctx, n, id); err != nil {
						b.Error(err)
						return
					}
					lat.add(time.Since(start))
				}
			})
			b.StopTimer()
			lat.report(b)
		})
	}
}

// BenchmarkListDuringSandboxBurst is the store-lock model at work: 100
// ListContainers callers while 50 RunPodSandbox (then RemovePodSandbox) loops
// keep mutations in flight, with realistic latencies, store lock off and on.
// One op is one List call.
func BenchmarkListDuringSandboxBurst(b *testing.B) {
	for _, storeLock := range []bool{false, true} {
		b.Run(fmt.Sprintf("storelock=%v", storeLock), func(b *testing.B) {
			opts := []crisim.Option{crisim.WithRealisticLatencies(), crisim.WithSeed(42)}
			if storeLock {
				opts = append(opts, crisim.WithStoreLock())
			}
			n := startNode(b, opts...)
			ctx, stop := context.WithCancel(context.Background())
			var mutators sync.WaitGroup
			var seq atomic.Int64
			for range 50 {
				mutators.Go(func() {
					for ctx.Err() == nil {
						name := fmt.Sprint("burst-", seq.Add(1))
						resp, err := n.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(name)})
						if err != nil {
							continue
						}
						n.rs.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: resp.PodSandboxId})
					}
				})
			}
			var lat latencies
			var next atomic.Int64
			var listers sync.WaitGroup
			b.ResetTimer()
			for range 100 {
				listers.Go(func() {
					for next.Add(1) <= int64(b.N) {
						start := time.Now()
						if _, err := n.rs.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{}); err != nil {
							b.Error(err)
							return
						}
						lat.add(time.Since(start))
					}
				})
			}
			listers.Wait()
			b.StopTimer()
			stop()
			mutators.Wait()
			lat.report(b)
		})
	}
}
