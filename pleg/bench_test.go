package pleg

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/internal/testnode"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
)

// The kubelet-like baseline is the same PLEG with the event stream off
// (relisting every second, like the generic PLEG) and, for the relist
// duration, serial inspection (WithInspectParallelism(1)).

func totalCalls(rt *crisim.Runtime) int64 {
	var n int64
	for _, v := range rt.CallCounts() {
		n += v
	}
	return n
}

// BenchmarkIdleRuntimeCalls: 100 pods x 3 containers, nothing changes;
// runtime calls per minute, simulated over 10 minutes of a fake clock.
func BenchmarkIdleRuntimeCalls(b *testing.B) {
	for _, mode := range []string{"relist-1s", "evented"} {
		b.Run("mode="+mode, func(b *testing.B) {
			rt, c := startSim(b)
			makePods(b, c, 100, 3)
			clk := testclock.NewFakeClock(time.Now())
			p, err := New(c, newFakeCache(), WithClock(clk), WithEventStream(mode == "evented"))
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			go func() {
				for range p.Watch() {
				}
			}()
			settle := func() {
				waitFor(b, "relist loop waiting", func() bool { return clk.HasWaiters() && len(p.wakeRelist) == 0 })
			}
			if mode == "evented" {
				waitFor(b, "evented mode", func() bool { return p.Mode() == ModeEvented })
			} else {
				waitFor(b, "first relist", func() bool { return p.Stats().Relists > 0 })
			}
			settle()
			const minutes = 10
			var calls int64
			b.ResetTimer()
			for range b.N {
				rt.ResetCalls()
				for range minutes * 60 {
					before := p.Stats()
					clk.Step(time.Second)
					if mode != "evented" {
						waitFor(b, "relist", func() bool { return p.Stats().Relists > before.Relists })
					}
					settle()
				}
				calls += totalCalls(rt)
			}
			b.ReportMetric(float64(calls)/float64(b.N)/minutes, "calls/min")
		})
	}
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}

// exitLatencyRun measures container exit → ContainerDied delivered for
// exits spread over window, on one PLEG.
type latencyProbe struct {
	mu      sync.Mutex
	waiting map[string]time.Time
	got     []time.Duration
	done    chan struct{}
}

func watchDied(p *PLEG) *latencyProbe {
	l := &latencyProbe{waiting: map[string]time.Time{}, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for e := range p.Watch() {
			if e.Type != ContainerDied {
				continue
			}
			now := time.Now()
			l.mu.Lock()
			if at, ok := l.waiting[e.Data]; ok {
				l.got = append(l.got, now.Sub(at))
				delete(l.waiting, e.Data)
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *latencyProbe) expect(id string, at time.Time) {
	l.mu.Lock()
	l.waiting[id] = at
	l.mu.Unlock()
}

func (l *latencyProbe) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting)
}

// BenchmarkExitLatency: 100 pods x 3 containers on crisim with
// containerd-like latencies; 30 containers per iteration exit at random
// moments over 2 s; p50/p99 of exit → ContainerDied delivered.
func BenchmarkExitLatency(b *testing.B) {
	for _, mode := range []string{"relist-1s", "evented"} {
		b.Run("runtime=crisim/mode="+mode, func(b *testing.B) {
			rt, c := startSim(b, crisim.WithRealisticLatencies(), crisim.WithSeed(1))
			pods := makePods(b, c, 100, 3)
			p, err := New(c, newFakeCache(), WithEventStream(mode == "evented"))
			if err != nil {
				b.Fatal(err)
			}
			l := watchDied(p)
			if err := p.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer func() { p.Close(); <-l.done }()
			if mode == "evented" {
				waitFor(b, "evented mode", func() bool { return p.Mode() == ModeEvented })
			}
			waitFor(b, "first relist", func() bool { return p.Stats().Relists > 0 })
			rng := rand.New(rand.NewPCG(1, 2))
			attempt := uint32(0)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				attempt++
				var ids []string
				for i := range 30 { // fresh running containers
					sp := pods[(int(attempt)*30+i)%len(pods)]
					ids = append(ids, startContainer(b, c, sp, fmt.Sprintf("x%d-%d", attempt, i), 0))
				}
				time.Sleep(1100 * time.Millisecond) // let relist mode see them start
				b.StartTimer()
				start := time.Now()
				for _, id := range ids {
					at := start.Add(time.Duration(rng.Int64N(int64(2 * time.Second))))
					time.Sleep(time.Until(at))
					l.expect(id, time.Now())
					if err := rt.ExitContainer(id, 0); err != nil {
						b.Fatal(err)
					}
				}
				waitFor(b, "all exits delivered", func() bool { return l.pending() == 0 })
			}
			b.StopTimer()
			l.mu.Lock()
			got := slices.Clone(l.got)
			l.mu.Unlock()
			b.ReportMetric(float64(percentile(got, 0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(percentile(got, 0.99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(len(got)), "exits")
		})
	}
	for _, mode := range []string{"relist-1s", "evented"} {
		b.Run("runtime=containerd/mode="+mode, func(b *testing.B) { benchRealNodeExitLatency(b, mode == "evented") })
	}
}

// benchRealNodeExitLatency: real containerd; containers exit on their own
// after random sleeps; latency from the container's FinishedAt (containerd's
// record of the exit) to ContainerDied delivered.
func benchRealNodeExitLatency(b *testing.B, evented bool) {
	n := testnode.Start(b)
	img := n.PushImage(b, "pleg/bench")
	ctx := context.Background()
	c, err := criclient.Dial(ctx, n.Endpoint)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: img}, nil, nil); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	delivered := map[string]time.Time{}
	stoppedAt := map[string]int64{} // STOPPED event CreatedAt, as containerd stamped it
	h := &hookRuntime{Runtime: c}
	h.events = func(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
		mid := make(chan *runtimeapi.ContainerEventResponse, 128)
		errc := make(chan error, 1)
		go func() { errc <- c.GetContainerEvents(ctx, mid, cb) }()
		for {
			select {
			case e := <-mid:
				if e.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
					mu.Lock()
					stoppedAt[e.ContainerId] = e.CreatedAt
					mu.Unlock()
				}
				select {
				case ch <- e:
				case <-ctx.Done():
				}
			case err := <-errc:
				return err
			}
		}
	}
	p, err := New(h, newFakeCache(), WithEventStream(evented))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range p.Watch() {
			if e.Type == ContainerDied {
				mu.Lock()
				delivered[e.Data] = time.Now()
				mu.Unlock()
			}
		}
	}()
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { p.Close(); <-done }()
	if evented {
		waitFor(b, "evented mode", func() bool { return p.Mode() == ModeEvented })
	}
	sbCfg := n.SandboxConfig("bench", "uid-bench")
	sb, err := c.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		b.Fatal(err)
	}
	var lat, pipe []time.Duration
	k := 0
	b.ResetTimer()
	for range b.N {
		var ids []string
		for i := range 10 {
			k++
			cfg := n.ContainerConfig(fmt.Sprintf("c%d", k), img, "sleep", fmt.Sprintf("%dms", 500+i*137), "exit", "0")
			id, err := c.CreateContainer(ctx, sb, cfg, sbCfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.StartContainer(ctx, id); err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		}
		waitFor(b, "exits delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if _, ok := delivered[id]; !ok {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			st, err := c.ContainerStatus(ctx, id, false)
			if err != nil {
				b.Fatal(err)
			}
			mu.Lock()
			lat = append(lat, delivered[id].Sub(time.Unix(0, st.GetStatus().GetFinishedAt())))
			if at, ok := stoppedAt[id]; ok {
				pipe = append(pipe, delivered[id].Sub(time.Unix(0, at)))
			}
			mu.Unlock()
			_ = c.RemoveContainer(ctx, id)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(lat)), "exits")
	if evented {
		// From containerd's STOPPED event (CreatedAt) to delivery: the
		// PLEG's own share; the rest is containerd's exit handling.
		b.ReportMetric(float64(percentile(pipe, 0.5).Microseconds())/1000, "event-p50-ms")
		b.ReportMetric(float64(percentile(pipe, 0.99).Microseconds())/1000, "event-p99-ms")
	}
}

// BenchmarkRelistDuration: one full relist in which all 100 pods (300
// containers) changed, so every pod is inspected; status calls take 2 ms.
// Serial inspection (the kubelet) vs parallel.
func BenchmarkRelistDuration(b *testing.B) {
	for _, par := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			_, c := startSim(b, crisim.WithLatency("ContainerStatus", crisim.Fixed(2*time.Millisecond)),
				crisim.WithLatency("PodSandboxStatus", crisim.Fixed(2*time.Millisecond)))
			makePods(b, c, 100, 3)
			ctx := context.Background()
			var total time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				p, err := New(c, newFakeCache(), WithEventStream(false), WithInspectParallelism(par), WithChannelCapacity(2000))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				if err := p.relist(ctx); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				b.StopTimer()
				if got := p.Stats().Inspections; got != 100 {
					b.Fatalf("inspected %d pods, want 100", got)
				}
				p.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "relist-ms")
		})
	}
}
