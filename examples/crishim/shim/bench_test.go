package shim_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/crishim/shim"
	"github.com/syncpod/syncpod/internal/testnode"
)

const (
	burstPods   = 50
	imageSize   = 30 << 20  // 300ms at the pull bandwidth below:
	pullBps     = 100 << 20 // comparable to RunPodSandbox's latency
	relistEvery = time.Second
)

// BenchmarkKubeletBurst runs a kubelet-like client against crisim with the
// store-lock model: a relist (ListPodSandbox + ListContainers) every
// second, and a burst of 50 pods, each RunPodSandbox → PullImage (its own
// image) → CreateContainer → StartContainer, all at once. Modes: direct to
// the runtime, through the shim, through the shim with async
// RunPodSandbox.
func BenchmarkKubeletBurst(b *testing.B) {
	for _, mode := range []string{"direct", "shim", "shim-async"} {
		b.Run("mode="+mode, func(b *testing.B) {
			var lists, relists, starts []time.Duration
			var makespan time.Duration
			for range b.N {
				l, r, s, m := burstOnce(b, mode)
				lists, relists, starts = append(lists, l...), append(relists, r...), append(starts, s...)
				makespan += m
			}
			b.ReportMetric(ms(pct(lists, 99)), "list-p99-ms")
			b.ReportMetric(ms(slices.Max(relists)), "worst-relist-ms")
			b.ReportMetric(ms(makespan)/float64(b.N), "makespan-ms")
			b.ReportMetric(ms(pct(starts, 99)), "podstart-p99-ms")
			b.ReportMetric(ms(pct(starts, 50)), "podstart-p50-ms")
		})
	}
}

func burstOnce(b *testing.B, mode string) (lists, relists, starts []time.Duration, makespan time.Duration) {
	b.StopTimer()
	opts := []crisim.Option{crisim.WithRealisticLatencies(), crisim.WithStoreLock(), crisim.WithSeed(42),
		crisim.WithLatency("RunPodSandbox", crisim.LogNormal(300*time.Millisecond, 600*time.Millisecond)),
		crisim.WithPullBandwidth(pullBps), crisim.WithMaxConcurrentDownloads(burstPods), crisim.WithEventBuffer(10000)}
	for i := range burstPods {
		opts = append(opts, crisim.WithRegistryImage(fmt.Sprintf("app-%d:1", i), imageSize))
	}
	srv, err := crisim.Start(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	endpoint := srv.Endpoint()
	if mode != "direct" {
		sv := serve(b, srv.Endpoint(), shim.Config{AsyncRunPodSandbox: mode == "shim-async", AsyncWorkers: burstPods})
		defer sv.stop()
		endpoint = "unix://" + sv.socket
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	rt, img := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil { // warm up
		b.Fatal(err)
	}

	b.StartTimer()
	began := time.Now()
	stopRelist := make(chan struct{})
	relistDone := make(chan struct{})
	var mu sync.Mutex
	go func() {
		defer close(relistDone)
		t := time.NewTicker(relistEvery)
		defer t.Stop()
		for {
			r0 := time.Now()
			_, err1 := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
			l1 := time.Since(r0)
			_, err2 := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			l2 := time.Since(r0) - l1
			if err1 != nil || err2 != nil {
				b.Error(err1, err2)
			}
			mu.Lock()
			lists, relists = append(lists, l1, l2), append(relists, l1+l2)
			mu.Unlock()
			select {
			case <-stopRelist:
				return
			case <-t.C:
			}
		}
	}()
	var wg sync.WaitGroup
	startCh := make(chan time.Duration, burstPods)
	for i := range burstPods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			name := fmt.Sprintf("pod-%d", i)
			sbCfg := sandboxConfig(name)
			sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
			if err != nil {
				b.Error(err)
				return
			}
			image := fmt.Sprintf("app-%d:1", i)
			if _, err := img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}, SandboxConfig: sbCfg}); err != nil {
				b.Error(err)
				return
			}
			cc := containerConfig("app")
			cc.Image.Image = image
			c, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: cc, SandboxConfig: sbCfg})
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
				b.Error(err)
				return
			}
			startCh <- time.Since(t0)
		}()
	}
	wg.Wait()
	makespan = time.Since(began)
	close(stopRelist)
	<-relistDone
	b.StopTimer()
	close(startCh)
	for d := range startCh {
		starts = append(starts, d)
	}
	return lists, relists, starts, makespan
}

// BenchmarkRealNodeUnaryOverhead measures a unary call (Version, and
// PodSandboxStatus of a running pod) on real containerd, direct and through
// the shim; the difference of the p50s is the shim's added latency.
func BenchmarkRealNodeUnaryOverhead(b *testing.B) {
	n := testnode.Start(b)
	ctx := context.Background()
	sb, err := n.RuntimeService().RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: n.SandboxConfig("bench", "uid-bench")})
	if err != nil {
		b.Fatal(err)
	}
	sv := serve(b, n.Endpoint, shim.Config{})
	conn, err := grpc.NewClient(n.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	direct := runtimeapi.NewRuntimeServiceClient(conn)
	for _, c := range []struct {
		name string
		rt   runtimeapi.RuntimeServiceClient
	}{{"direct", direct}, {"shim", sv.rt}} {
		for _, call := range []struct {
			name string
			do   func(runtimeapi.RuntimeServiceClient) error
		}{
			{"Version", func(rt runtimeapi.RuntimeServiceClient) error {
				_, err := rt.Version(ctx, &runtimeapi.VersionRequest{})
				return err
			}},
			{"PodSandboxStatus", func(rt runtimeapi.RuntimeServiceClient) error {
				_, err := rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
				return err
			}},
		} {
			b.Run("call="+call.name+"/path="+c.name, func(b *testing.B) {
				lat := make([]time.Duration, 0, b.N)
				for range b.N {
					t0 := time.Now()
					if err := call.do(c.rt); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				b.ReportMetric(float64(pct(lat, 50).Microseconds()), "p50-us")
				b.ReportMetric(float64(pct(lat, 99).Microseconds()), "p99-us")
			})
		}
	}
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
