package criclient_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// burstRuntime is what the benchmark needs from a CRI client; the plain gRPC
// client and criclient.Client both sit behind it.
type burstRuntime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
}

var _ burstRuntime = (*criclient.Client)(nil)

// plainRuntime is the kubelet-like baseline: every call goes straight to the
// runtime over gRPC.
type plainRuntime struct {
	rt runtimeapi.RuntimeServiceClient
}

func (p plainRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	resp, err := p.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: f})
	return resp.GetContainers(), err
}

func (p plainRuntime) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, h string) (string, error) {
	resp, err := p.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: h})
	return resp.GetPodSandboxId(), err
}

func (p plainRuntime) StopPodSandbox(ctx context.Context, id string) error {
	_, err := p.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	return err
}

func (p plainRuntime) RemovePodSandbox(ctx context.Context, id string) error {
	_, err := p.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	return err
}

const (
	burstSandboxes = 50
	burstListers   = 100
	// listerPause is the think time of a lister between Lists: health checks
	// and relists are periodic, not tight loops.
	listerPause = 5 * time.Millisecond
)

// BenchmarkListDuringSandboxBurst: on crisim with the store-lock model and
// realistic latencies, 50 RunPodSandbox calls are sent through the client;
// once all 50 are in the runtime, 100 goroutines call ListContainers (then
// pause listerPause, and again) until the burst is over. One op is one
// burst. Reported: List latency percentiles over all bursts, Lists made and
// the runtime ListContainers calls they cost.
func BenchmarkListDuringSandboxBurst(b *testing.B) {
	variants := []struct {
		name string
		dial func(b *testing.B, srv *crisim.Server) burstRuntime
	}{
		{"client=plain-grpc", func(b *testing.B, srv *crisim.Server) burstRuntime {
			conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = conn.Close() })
			return plainRuntime{runtimeapi.NewRuntimeServiceClient(conn)}
		}},
		{"client=criclient", func(b *testing.B, srv *crisim.Server) burstRuntime {
			return dial(b, srv)
		}},
		{"client=criclient-snapshots", func(b *testing.B, srv *crisim.Server) burstRuntime {
			return dial(b, srv, criclient.WithListSnapshots(time.Second))
		}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			srv := startSim(b, crisim.WithStoreLock(), crisim.WithRealisticLatencies(), crisim.WithSeed(7))
			populate(b, srv)
			rt := v.dial(b, srv)
			ctx := context.Background()

			var latencies []time.Duration
			var mu sync.Mutex
			b.ResetTimer()
			for round := range b.N {
				b.StopTimer()
				if _, err := rt.ListContainers(ctx, nil); err != nil { // steady state before the burst
					b.Fatal(err)
				}
				b.StartTimer()
				sent := srv.Runtime().Calls("RunPodSandbox")
				burstDone := make(chan struct{})
				ids := make([]string, burstSandboxes)
				var burst, listers sync.WaitGroup
				for i := range burstSandboxes {
					burst.Go(func() {
						id, err := rt.RunPodSandbox(ctx, sandboxConfig(fmt.Sprintf("burst-%d-%d", round, i)), "")
						if err != nil {
							b.Error(err)
						}
						ids[i] = id
					})
				}
				// The Lists start once all 50 RunPodSandbox have reached the
				// runtime, so every variant meets the same store state.
				for srv.Runtime().Calls("RunPodSandbox") < sent+burstSandboxes {
					time.Sleep(100 * time.Microsecond)
				}
				for range burstListers {
					listers.Go(func() {
						var mine []time.Duration
						for {
							start := time.Now()
							if _, err := rt.ListContainers(ctx, nil); err != nil {
								b.Error(err)
								return
							}
							mine = append(mine, time.Since(start))
							select {
							case <-burstDone:
								mu.Lock()
								latencies = append(latencies, mine...)
								mu.Unlock()
								return
							case <-time.After(listerPause):
							}
						}
					})
				}
				burst.Wait()
				close(burstDone)
				listers.Wait()
				b.StopTimer()
				var cleanup sync.WaitGroup
				for _, id := range ids {
					if id == "" {
						continue
					}
					cleanup.Go(func() {
						if err := rt.StopPodSandbox(ctx, id); err != nil {
							b.Error(err)
						}
						if err := rt.RemovePodSandbox(ctx, id); err != nil {
							b.Error(err)
						}
					})
				}
				cleanup.Wait()
				b.StartTimer()
			}
			b.StopTimer()
			slices.Sort(latencies)
			pct := func(p float64) float64 {
				if len(latencies) == 0 {
					return 0
				}
				i := int(math.Ceil(p*float64(len(latencies)))) - 1
				return float64(latencies[max(i, 0)]) / float64(time.Millisecond)
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(pct(1), "max-ms")
			b.ReportMetric(float64(len(latencies))/float64(b.N), "lists/op")
			b.ReportMetric(float64(srv.Runtime().Calls("ListContainers"))/float64(b.N), "runtime-lists/op")
		})
	}
}

// populate gives the node 20 pods with 3 containers each, so Lists carry a
// realistic payload.
func populate(b *testing.B, srv *crisim.Server) {
	c := dial(b, srv)
	ctx := context.Background()
	for p := range 20 {
		cfg := sandboxConfig(fmt.Sprint("steady-", p))
		sb, err := c.RunPodSandbox(ctx, cfg, "")
		if err != nil {
			b.Fatal(err)
		}
		for k := range 3 {
			id, err := c.CreateContainer(ctx, sb, containerConfig(fmt.Sprint("c", k)), cfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.StartContainer(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	}
	srv.Runtime().ResetCalls()
}
