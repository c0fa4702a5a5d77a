package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runtimeCosts is what a real runtime spends on the work of a scenario
// when it does nothing else: the floor under every orchestrator on that
// node, whatever it does.
type runtimeCosts struct {
	// Cores is the node's cores.
	Cores int
	// Sandbox and CreateStart are the median latencies of one
	// RunPodSandbox, and of one CreateContainer then StartContainer,
	// each alone on the node.
	Sandbox, CreateStart time.Duration
	// SandboxCPU and CreateStartCPU are the node's busy core time per
	// sandbox and per container create and start, every process counted
	// (containerd, shims, runc, the kernel), over a serial series.
	SandboxCPU, CreateStartCPU time.Duration
	// Pulls are the images, each pulled alone with nothing else running.
	Pulls map[string]pullCost
}

// pullCost is one image pulled alone.
type pullCost struct {
	Time, CPU time.Duration
	Bytes     uint64
}

// bandwidth is the best pull rate seen, in bytes a second: the largest
// image's, where latency counts least.
func (c runtimeCosts) bandwidth() float64 {
	var best pullCost
	for _, p := range c.Pulls {
		if p.Bytes > best.Bytes {
			best = p
		}
	}
	if best.Time <= 0 {
		return 0
	}
	return float64(best.Bytes) / best.Time.Seconds()
}

// nodeCPU reads the node's busy and elapsed core time (procstat.Node on a
// real node).
type nodeCPU func() (busy, total time.Duration, err error)

// costProbe says how measureRuntimeCosts makes its sandboxes and
// containers: configs like the orchestrators' own (same namespaces, same
// image and program), so the costs are of the same work.
type costProbe struct {
	Sandbox   func(i int) *runtimeapi.PodSandboxConfig
	Container func(i int) *runtimeapi.ContainerConfig
	// Image is the containers' image; it is pulled before the series.
	Image string
	// N is how many sandboxes, each with one container, the series makes.
	N int
}

// measureStartCosts runs probe's series alone on the runtime: N
// sandboxes one after another, then one container in each, created and
// started one after another, the node's CPU read around every call; then
// removes them.
func measureStartCosts(ctx context.Context, rt runtimeapi.RuntimeServiceClient, is runtimeapi.ImageServiceClient, cpu nodeCPU, probe costProbe) (c runtimeCosts, err error) {
	if probe.N < 1 {
		return c, fmt.Errorf("cost probe: N = %d, want at least 1", probe.N)
	}
	if _, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: probe.Image}}); err != nil {
		return c, fmt.Errorf("cost probe: pull %s: %w", probe.Image, err)
	}
	type made struct {
		id  string
		cfg *runtimeapi.PodSandboxConfig
	}
	var sandboxes []made
	defer func() {
		for _, sb := range sandboxes {
			_, e1 := rt.StopPodSandbox(context.WithoutCancel(ctx), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.id})
			_, e2 := rt.RemovePodSandbox(context.WithoutCancel(ctx), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.id})
			if err == nil && (e1 != nil || e2 != nil) {
				err = fmt.Errorf("cost probe: remove sandbox %s: %v, %v", sb.id, e1, e2)
			}
		}
	}()
	// timed runs op, returning its latency and the node's busy core time
	// over it.
	timed := func(op func() error) (lat, busy time.Duration, err error) {
		b0, _, err := cpu()
		if err != nil {
			return 0, 0, err
		}
		start := time.Now()
		if err := op(); err != nil {
			return 0, 0, err
		}
		lat = time.Since(start)
		b1, _, err := cpu()
		return lat, b1 - b0, err
	}
	var sbLat, csLat []time.Duration
	var sbCPU, csCPU time.Duration
	for i := range probe.N {
		cfg := probe.Sandbox(i)
		var id string
		lat, busy, err := timed(func() error {
			resp, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
			id = resp.GetPodSandboxId()
			return err
		})
		if err != nil {
			return c, fmt.Errorf("cost probe: sandbox %d: %w", i, err)
		}
		sandboxes = append(sandboxes, made{id, cfg})
		sbLat, sbCPU = append(sbLat, lat), sbCPU+busy
	}
	for i, sb := range sandboxes {
		lat, busy, err := timed(func() error {
			resp, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.id, Config: probe.Container(i), SandboxConfig: sb.cfg})
			if err != nil {
				return err
			}
			_, err = rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId})
			return err
		})
		if err != nil {
			return c, fmt.Errorf("cost probe: container %d: %w", i, err)
		}
		csLat, csCPU = append(csLat, lat), csCPU+busy
	}
	n := time.Duration(probe.N)
	c.Sandbox, c.CreateStart = percentile(sbLat, 50), percentile(csLat, 50)
	c.SandboxCPU, c.CreateStartCPU = sbCPU/n, csCPU/n
	return c, nil
}

// measurePulls pulls each image alone, one after another (each must be
// absent), and reads its time, the node's busy core time over it and its
// size.
func measurePulls(ctx context.Context, is runtimeapi.ImageServiceClient, cpu nodeCPU, images []string) (map[string]pullCost, error) {
	out := map[string]pullCost{}
	for _, img := range images {
		b0, _, err := cpu()
		if err != nil {
			return nil, err
		}
		start := time.Now()
		if _, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
			return nil, fmt.Errorf("pull %s: %w", img, err)
		}
		d := time.Since(start)
		b1, _, err := cpu()
		if err != nil {
			return nil, err
		}
		st, err := is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: img}})
		if err != nil {
			return nil, fmt.Errorf("image status %s: %w", img, err)
		}
		out[img] = pullCost{Time: d, CPU: b1 - b0, Bytes: st.GetImage().GetSize()}
	}
	return out, nil
}

// realBound is a scenario's lower bound on a real node: the startups'
// p50 and p99 and the slowest, and how the p99 was made.
type realBound struct {
	P50, P99, Max time.Duration
	Why           string
}

// realLowerBound is how fast pods could start on a node of costs c at
// best, pod i handed over at arrival(i), init containers that run to
// completion taking initRun:
//
//   - Critical path, per pod: its sandbox, and the rest of its first
//     image's pull alone (begun when the first pod needing it arrived),
//     overlap; each init container is then created and started (one
//     CreateStart; a run-to-completion one also runs initRun); the
//     regular containers are created and started together, each once its
//     image is present. A perfect orchestrator sees every change at once.
//   - Cores: the sandboxes, container starts and pulls cost the node
//     their core time alone; all of it, over the cores, must pass after
//     the first pod arrives and before the last pod is up (taken as the
//     capacity bound, scaled by ceil(qN)/N for a percentile q of N pods,
//     as for identical pods).
//   - Bandwidth: every image is present no earlier than its bytes, summed,
//     over the best bandwidth seen; the pod that waits for the last one
//     then starts its container.
//
// It is a yardstick, not a theorem: the latencies are medians, so a lucky
// run can land just under it.
func realLowerBound(pods []*corev1.Pod, measured func(key string) bool, arrival func(i int) time.Duration, c runtimeCosts, initRun time.Duration) realBound {
	// An image is asked for when the first pod needing it arrives; a pod
	// arriving later waits only for what is left of that pull.
	firstUse := map[string]time.Duration{}
	for i, p := range pods {
		for _, ctr := range podContainers(p) {
			if at, ok := firstUse[ctr.Image]; !ok || arrival(i) < at {
				firstUse[ctr.Image] = arrival(i)
			}
		}
	}
	var paths []time.Duration
	var work time.Duration
	var lastArrival time.Duration
	images := map[string]bool{}
	for i, p := range pods {
		if !measured(p.Namespace + "/" + p.Name) {
			continue
		}
		lastArrival = max(lastArrival, arrival(i))
		ready := func(img string) time.Duration { return max(0, firstUse[img]+c.Pulls[img].Time-arrival(i)) }
		work += c.SandboxCPU
		t := c.Sandbox
		for _, ic := range p.Spec.InitContainers {
			images[ic.Image] = true
			work += c.CreateStartCPU
			t = max(t, ready(ic.Image)) + c.CreateStart
			if ic.RestartPolicy == nil {
				t += initRun
			}
		}
		end := t
		for _, rc := range p.Spec.Containers {
			images[rc.Image] = true
			work += c.CreateStartCPU
			end = max(end, max(t, ready(rc.Image))+c.CreateStart)
		}
		paths = append(paths, end)
	}
	if len(paths) == 0 {
		return realBound{}
	}
	var bytes uint64
	for img := range images {
		work += c.Pulls[img].CPU
		bytes += c.Pulls[img].Bytes
	}
	cores := time.Duration(max(c.Cores, 1))
	capacity := max(0, work/cores-lastArrival)
	var transfer time.Duration
	if bw := c.bandwidth(); bw > 0 {
		transfer = max(0, time.Duration(float64(bytes)/bw*float64(time.Second))+c.CreateStart-lastArrival)
	}
	// at is the bound at percentile q, and its three parts.
	at := func(q float64) (bound, path, cpu, bw time.Duration) {
		k := math.Ceil(q * float64(len(paths)))
		scale := k / float64(len(paths))
		path, cpu, bw = percentile(paths, q*100), time.Duration(scale*float64(capacity)), time.Duration(scale*float64(transfer))
		return max(path, cpu, bw), path, cpu, bw
	}
	b := realBound{Max: max(slices.Max(paths), capacity, transfer)}
	b.P50, _, _, _ = at(0.50)
	var path, cpu, bw time.Duration
	b.P99, path, cpu, bw = at(0.99)
	b.Why = fmt.Sprintf("max(critical path p99 %v, cores %v, bandwidth %v); alone: sandbox %v (%v CPU), create+start %v (%v CPU), %.0f MB/s, %d cores",
		path.Round(time.Millisecond), cpu.Round(time.Millisecond), bw.Round(time.Millisecond),
		c.Sandbox.Round(time.Millisecond), c.SandboxCPU.Round(time.Millisecond), c.CreateStart.Round(time.Millisecond), c.CreateStartCPU.Round(time.Millisecond),
		c.bandwidth()/1e6, c.Cores)
	return b
}

// podContainers is every container of p, init containers first.
func podContainers(p *corev1.Pod) []corev1.Container {
	return append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...)
}
