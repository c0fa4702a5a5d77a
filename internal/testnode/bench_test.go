package testnode

import (
	"testing"
	"time"
)

// iterationTB runs a node's cleanups at the end of one benchmark
// iteration instead of at the end of the benchmark.
type iterationTB struct {
	testing.TB
	cleanups []func()
}

func (i *iterationTB) Cleanup(f func()) { i.cleanups = append(i.cleanups, f) }

func (i *iterationTB) runCleanups() {
	for k := len(i.cleanups) - 1; k >= 0; k-- {
		i.cleanups[k]()
	}
	i.cleanups = nil
}

// BenchmarkRealNodeStart measures what a real-node test pays for its node:
// Start (registry, pause image, containerd up and answering) and the
// teardown, and a pod with one container run to its exit on top.
func BenchmarkRealNodeStart(b *testing.B) {
	tb := &iterationTB{TB: b}
	var start, pod, down time.Duration
	for b.Loop() {
		t0 := time.Now()
		n := Start(tb)
		t1 := time.Now()
		img := n.PushImage(tb, "bench/workload")
		_, cid, _ := runPodTB(tb, n, "bench", img, "exit", "0")
		n.WaitContainerExited(tb, cid, time.Minute)
		t2 := time.Now()
		tb.runCleanups()
		start += t1.Sub(t0)
		pod += t2.Sub(t1)
		down += time.Since(t2)
	}
	iters := float64(b.N)
	b.ReportMetric(float64(start.Milliseconds())/iters, "start-ms")
	b.ReportMetric(float64(pod.Milliseconds())/iters, "pod-ms")
	b.ReportMetric(float64(down.Milliseconds())/iters, "teardown-ms")
}
