package podplan_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/syncpod/syncpod/concurrentstart/podplan"
	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	benchImage   = "registry.local/app:1"
	benchLatency = 150 * time.Millisecond // per CreateContainer and per StartContainer
)

// benchPod is a pod with one init container and n regular containers.
func benchPod(n int) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("pod-%d", n)},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init", Image: benchImage}}}}
	for i := range n {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: benchImage})
	}
	return p
}

// crisimEnv is a crisim server with the benchmark's latencies and a client.
type crisimEnv struct {
	srv *crisim.Server
	cli *criclient.Client
	seq int
}

func newCrisimEnv(b *testing.B) *crisimEnv {
	b.Helper()
	srv, err := crisim.Start(
		crisim.WithLatency("CreateContainer", crisim.Fixed(benchLatency)),
		crisim.WithLatency("StartContainer", crisim.Fixed(benchLatency)),
		crisim.WithImage(benchImage, 1<<20),
	)
	if err != nil {
		b.Fatal(err)
	}
	cli, err := criclient.Dial(context.Background(), srv.Endpoint())
	if err != nil {
		srv.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cli.Close()
		_ = srv.Close()
	})
	return &crisimEnv{srv: srv, cli: cli}
}

// startOnce starts pod's containers in a fresh sandbox with s and returns
// how long the container starts took (sandbox setup and teardown excluded).
func (e *crisimEnv) startOnce(b *testing.B, s podStarter, pod *corev1.Pod) time.Duration {
	ctx := context.Background()
	e.seq++
	sb := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{
		Name: pod.Name, Namespace: pod.Namespace, Uid: fmt.Sprintf("uid-%d", e.seq)}}
	podID, err := e.cli.RunPodSandbox(ctx, sb, "")
	if err != nil {
		b.Fatal(err)
	}
	p := &criPod{rs: e.cli.CRI(), podID: podID, sb: sb, poll: 5 * time.Millisecond,
		config: func(c podplan.Container) *runtimeapi.ContainerConfig {
			cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: c.Name},
				Image: &runtimeapi.ImageSpec{Image: c.Spec.Image}}
			if c.Role == podplan.Init {
				cfg.Annotations = map[string]string{crisim.AnnotationExitAfter: "0s"}
			}
			return cfg
		}}
	begin := time.Now()
	if err := s.startPod(ctx, pod, p.funcs()); err != nil {
		b.Fatal(err)
	}
	took := time.Since(begin)
	_ = e.cli.StopPodSandbox(ctx, podID)
	_ = e.cli.RemovePodSandbox(ctx, podID)
	return took
}

// BenchmarkPodStartCRISim starts a pod of 1 init + 8 regular containers on
// crisim (150 ms per CreateContainer and per StartContainer, over real
// gRPC through criclient), the kubelet-like sequential way and with
// concurrentstart, and a 1 init + 1 regular pod whose start time is the
// critical path of the first. Every iteration runs all of them, so the
// ratios compare measurements taken side by side.
func BenchmarkPodStartCRISim(b *testing.B) {
	env := newCrisimEnv(b)
	full, critical := benchPod(8), benchPod(1)
	variants := []struct {
		name string
		s    podStarter
		pod  *corev1.Pod
	}{
		{"kubelet-sequential", sequentialStarter{}, full},
		{"concurrentstart-max8", planStarter{maxParallel: 8}, full},
		{"concurrentstart-max16", planStarter{maxParallel: 16}, full},
		{"critical-path", planStarter{maxParallel: 8}, critical},
	}
	totals := make([]time.Duration, len(variants))
	b.ResetTimer()
	for b.Loop() {
		for i, v := range variants {
			totals[i] += env.startOnce(b, v.s, v.pod)
		}
	}
	ms := func(i int) float64 { return float64(totals[i].Microseconds()) / 1000 / float64(b.N) }
	for i, v := range variants {
		b.ReportMetric(ms(i), v.name+"-ms")
	}
	b.ReportMetric(ms(0)/ms(1), "sequential/ours")
	b.ReportMetric(ms(1)/ms(3), "ours/critical-path")
	b.ReportMetric(ms(2)/ms(3), "ours16/critical-path")
	b.ReportMetric(0, "ns/op")
}
