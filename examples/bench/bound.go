package main

import (
	"fmt"
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

// lowerBound is what a perfect orchestrator could reach on the simulated
// runtime, with every call taking its median latency:
//
//   - Pulls: all images are asked for at t=0 and downloaded on the
//     runtime's D download slots, shortest first (which minimises every
//     completion time on identical slots); image i is present at
//     avail(i) = its slot's finish time, where a download takes
//     PullImage + size/bandwidth.
//   - Per pod, the critical path: sandbox S = RunPodSandbox; each regular
//     init container in order t = max(t, avail(img)) + Create + Start + run;
//     each sidecar t = max(t, avail(img)) + Create + Start; the pod is up at
//     max over its containers of max(t, avail(img)) + Create + Start
//     (observation is free: a perfect PLEG sees it at once).
//   - Runtime capacity: the runtime works on at most C calls at once. The
//     Create+Start work of the containers whose image arrives at or after
//     avail(i) cannot begin before avail(i), so the last pod is not up
//     before avail(i) + W(>=i)/C, for every image i (i = none: all the work
//     W, sandboxes included, from t=0). Work uses the latencies' means
//     (log-normal: mean = median*exp(sigma^2/2)), since the expected total
//     work is what C slots must absorb.
//
// The p99 bound is the larger of the p99 of the critical paths and the
// capacity bound scaled by ceil(0.99N)/N. The critical path uses medians,
// so a lucky run can land slightly below it: it is a yardstick, not a
// theorem.
func lowerBound(sc Scenario, q float64) (time.Duration, string) {
	rt := sc.Runtime
	f := rt.Scale
	med := func(m string) time.Duration { return time.Duration(float64(scenario.Median(m)) * f) }
	sb, create, start, pull := med("RunPodSandbox"), med("CreateContainer"), med("StartContainer"), med("PullImage")
	cs := create + start

	// Image availability.
	type img struct {
		ref string
		d   time.Duration
	}
	need := map[string]bool{}
	var pods []*corev1.Pod
	for _, p := range sc.Pods {
		pods = append(pods, p)
		for _, c := range podContainers(p) {
			need[normalize(c.Image)] = true
		}
	}
	var imgs []img
	bw := float64(rt.Bandwidth) / f
	for _, im := range rt.Images {
		if n := normalize(im.Ref); need[n] {
			imgs = append(imgs, img{n, pull + time.Duration(float64(im.Size)/bw*float64(time.Second))})
		}
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].d < imgs[j].d })
	slots := make([]time.Duration, max(rt.MaxDownloads, 1))
	avail := map[string]time.Duration{}
	for _, im := range imgs {
		k := 0
		for i := range slots {
			if slots[i] < slots[k] {
				k = i
			}
		}
		slots[k] += im.d
		avail[im.ref] = slots[k]
	}

	mean := func(m string) time.Duration { return time.Duration(float64(scenario.Mean(m)) * f) }
	sbW, csW := mean("RunPodSandbox"), mean("CreateContainer")+mean("StartContainer")
	gated := map[string]time.Duration{} // image → create+start work waiting for it
	var paths []time.Duration
	var work time.Duration
	for _, p := range pods {
		if sc.Measured != nil && !sc.Measured[p.Namespace+"/"+p.Name] {
			continue
		}
		t := sb
		work += sbW
		for _, c := range p.Spec.InitContainers {
			t = max(t, avail[normalize(c.Image)]) + cs
			work += csW
			gated[normalize(c.Image)] += csW
			if c.RestartPolicy == nil {
				t += initRun(p, c.Name)
			}
		}
		end := t
		for _, c := range p.Spec.Containers {
			end = max(end, max(t, avail[normalize(c.Image)])+cs)
			work += csW
			gated[normalize(c.Image)] += csW
		}
		paths = append(paths, end)
	}
	if len(paths) == 0 {
		return 0, ""
	}
	cp := percentile(paths, q*100)
	capacity := time.Duration(0)
	if rt.MaxConcurrency > 0 {
		c := float64(rt.MaxConcurrency)
		capacity = time.Duration(float64(work) / c)
		for _, im := range imgs {
			var after time.Duration
			for _, other := range imgs {
				if avail[other.ref] >= avail[im.ref] {
					after += gated[other.ref]
				}
			}
			if after > 0 {
				capacity = max(capacity, avail[im.ref]+time.Duration(float64(after)/c))
			}
		}
		k := math.Ceil(q * float64(len(paths)))
		capacity = time.Duration(k / float64(len(paths)) * float64(capacity))
	}
	b := max(cp, capacity)
	why := fmt.Sprintf("max(critical path p%.0f %v, capacity %v); medians ×%.2f: sandbox %v, create+start %v, %d download slots",
		q*100, cp.Round(time.Millisecond), capacity.Round(time.Millisecond), f, sb.Round(time.Millisecond), cs.Round(time.Millisecond), len(slots))
	return b, why
}

func initRun(p *corev1.Pod, name string) time.Duration {
	d, _ := time.ParseDuration(p.Annotations[crisim.AnnotationExitAfter+"."+name])
	return d
}

// normalize makes "registry.sim/x:1" and its docker.io spellings compare
// equal the simple way the scenarios need (they always give full refs).
func normalize(ref string) string { return ref }
