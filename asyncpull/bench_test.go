package asyncpull_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
)

// The simulated node of BenchmarkPodBurst: 10 images, the largest 20x the others' biggest,
// downloaded at benchBandwidth each, at most 3 at once (containerd's default).
const (
	benchPods      = 50
	benchBandwidth = 400 << 20
	benchDownloads = 3
)

var benchSizes = []int64{4 << 20, 6 << 20, 8 << 20, 10 << 20, 12 << 20, 14 << 20, 16 << 20, 18 << 20, 20 << 20, 400 << 20}

func benchImage(i int) string { return fmt.Sprintf("registry.example/bench/img%d:v1", i) }

// benchPodImages: every pod needs a shared base image, one of two sidecars and one of six app
// images; pod 0 (first to arrive) is the one that also needs the huge image.
func benchPodImages(p int) []string {
	imgs := []string{benchImage(0), benchImage(1 + p%2), benchImage(3 + p%6)}
	if p == 0 {
		imgs = append(imgs, benchImage(9))
	}
	return imgs
}

// podImagePuller is what a pod worker calls to get its pod's images; the three strategies
// implement it over the same runtime.
type podImagePuller interface {
	// SyncPod runs one sync of pod uid's images and returns when the worker is free again;
	// it reports whether every image is present. If not, the puller wakes the pod later.
	SyncPod(ctx context.Context, uid types.UID, images []string) bool
	Close()
}

// serialPuller is the kubelet's default: the pod worker handles its images one after another
// (inspect, then pull and wait), and one node-wide goroutine runs pulls in FIFO order from a
// queue of 10 requests. Concurrent pulls of one image are not merged.
type serialPuller struct {
	c    *criclient.Client
	reqs chan serialReq
	wg   sync.WaitGroup
}

type serialReq struct {
	image string
	done  chan error
}

func newSerialPuller(c *criclient.Client) *serialPuller {
	p := &serialPuller{c: c, reqs: make(chan serialReq, 10)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for r := range p.reqs {
			_, err := c.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: r.image}, nil, nil)
			r.done <- err
		}
	}()
	return p
}

func (p *serialPuller) SyncPod(ctx context.Context, _ types.UID, images []string) bool {
	for _, img := range images {
		if st, err := p.c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: img}, false); err == nil && st.GetImage() != nil {
			continue
		}
		r := serialReq{image: img, done: make(chan error, 1)}
		p.reqs <- r
		if err := <-r.done; err != nil {
			return false
		}
	}
	return true
}

func (p *serialPuller) Close() { close(p.reqs); p.wg.Wait() }

// parallelPuller is the kubelet with unlimited parallel pulls, made more aggressive: every
// image of every pod is inspected and pulled at once; nothing is merged or limited.
type parallelPuller struct{ c *criclient.Client }

func (p parallelPuller) SyncPod(ctx context.Context, _ types.UID, images []string) bool {
	var wg sync.WaitGroup
	ok := make([]bool, len(images))
	for i, img := range images {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := p.c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: img}, false); err == nil && st.GetImage() != nil {
				ok[i] = true
				return
			}
			_, err := p.c.PullImage(ctx, &runtimeapi.ImageSpec{Image: img}, nil, nil)
			ok[i] = err == nil
		}()
	}
	wg.Wait()
	return !slices.Contains(ok, false)
}

func (parallelPuller) Close() {}

// schedPuller is asyncpull: SyncPod never waits; the scheduler wakes the pod when done.
type schedPuller struct{ s *asyncpull.Scheduler }

func (p schedPuller) SyncPod(ctx context.Context, uid types.UID, images []string) bool {
	all := true
	for _, img := range images {
		if p.s.Ensure(ctx, asyncpull.Request{Image: img, PodUID: uid}).State != asyncpull.StatePresent {
			all = false
		}
	}
	return all
}

func (p schedPuller) Close() { p.s.Close() }

// podWorkers runs one goroutine per pod like the kubelet's pod workers: sync, and when the
// pod is not done, wait for a wake-up (capacity-one channel) and sync again.
type podWorkers struct {
	wake map[types.UID]chan struct{}
}

func (w *podWorkers) notify(uid types.UID) {
	if ch := w.wake[uid]; ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

type burstResult struct {
	ready, blocked []time.Duration // per pod
	makespan       time.Duration
	pulls, dls     int64
}

func runBurst(b *testing.B, strategy string) burstResult {
	var opts []crisim.Option
	for i, sz := range benchSizes {
		opts = append(opts, crisim.WithRegistryImage(benchImage(i), sz))
	}
	opts = append(opts, crisim.WithPullBandwidth(benchBandwidth), crisim.WithMaxConcurrentDownloads(benchDownloads),
		crisim.WithRealisticLatencies(), crisim.WithSeed(42))
	srv, err := crisim.Start(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	c, err := criclient.Dial(context.Background(), srv.Endpoint())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close() }()

	workers := &podWorkers{wake: map[types.UID]chan struct{}{}}
	for p := range benchPods {
		workers.wake[pod(p)] = make(chan struct{}, 1)
	}
	var puller podImagePuller
	switch strategy {
	case "serial-kubelet":
		puller = newSerialPuller(c)
	case "parallel-kubelet":
		puller = parallelPuller{c}
	case "asyncpull":
		puller = schedPuller{newScheduler(c, asyncpull.WithMaxParallel(benchDownloads), asyncpull.WithNotify(workers.notify))}
	case "asyncpull-serial":
		puller = schedPuller{newScheduler(c, asyncpull.WithMaxParallel(1), asyncpull.WithNotify(workers.notify))}
	}
	res := burstResult{ready: make([]time.Duration, benchPods), blocked: make([]time.Duration, benchPods)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for p := range benchPods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uid, images := pod(p), benchPodImages(p)
			for {
				t0 := time.Now()
				done := puller.SyncPod(ctx, uid, images)
				t1 := time.Now()
				res.blocked[p] += t1.Sub(t0)
				if done {
					res.ready[p] = t1.Sub(start)
					return
				}
				select {
				case <-workers.wake[uid]:
				case <-time.After(time.Second): // resync period, as a safety net
				}
			}
		}()
	}
	wg.Wait()
	res.makespan = time.Since(start)
	puller.Close()
	res.pulls = srv.Runtime().Calls("PullImage")
	for i := range benchSizes {
		res.dls += srv.Runtime().Downloads(benchImage(i))
	}
	return res
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkPodBurst: 50 pods arrive together on a simulated node; time until each pod's images
// are present and how long its pod worker was blocked, per strategy.
func BenchmarkPodBurst(b *testing.B) {
	for _, strategy := range []string{"serial-kubelet", "parallel-kubelet", "asyncpull", "asyncpull-serial"} {
		b.Run(strategy, func(b *testing.B) {
			var ready, blocked []time.Duration
			var makespan time.Duration
			var pulls, dls int64
			for range b.N {
				r := runBurst(b, strategy)
				ready = append(ready, r.ready...)
				blocked = append(blocked, r.blocked...)
				makespan += r.makespan
				pulls += r.pulls
				dls += r.dls
			}
			n := float64(b.N)
			b.ReportMetric(ms(percentile(ready, 0.50)), "p50-ms")
			b.ReportMetric(ms(percentile(ready, 0.99)), "p99-ms")
			b.ReportMetric(ms(makespan)/n, "makespan-ms")
			b.ReportMetric(ms(percentile(blocked, 0.99)), "blocked-p99-ms")
			b.ReportMetric(ms(percentile(blocked, 1)), "blocked-max-ms")
			b.ReportMetric(float64(pulls)/n, "pulls/op")
			b.ReportMetric(float64(dls)/n, "downloads/op")
		})
	}
}
