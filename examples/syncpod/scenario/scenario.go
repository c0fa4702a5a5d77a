package scenario

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/syncpod/syncpod/criclient/crisim"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Image is a registry image of the simulated node.
type Image struct {
	Ref  string // image reference, e.g. "registry.sim/app-0:1"
	Size int64  // bytes
}

// Runtime is the simulated node's settings, the same for both modes.
type Runtime struct {
	Scale          float64 // every latency and period is multiplied by Scale
	Bandwidth      int64   // bytes per second per download, before Scale
	MaxDownloads   int     // downloads at once (crisim.WithMaxConcurrentDownloads)
	MaxConcurrency int     // runtime-wide cap on unary calls
	StoreLock      bool    // List calls queue behind mutations (crisim.WithStoreLock)
	Seed           int64   // seed of the latency samples
	Images         []Image // the registry's images
}

// Options returns the crisim options for r.
func (r Runtime) Options() []crisim.Option {
	opts := []crisim.Option{crisim.WithSeed(r.Seed), crisim.WithMaxConcurrency(r.MaxConcurrency),
		crisim.WithMaxConcurrentDownloads(r.MaxDownloads)}
	if r.StoreLock {
		opts = append(opts, crisim.WithStoreLock())
	}
	if r.Bandwidth > 0 {
		opts = append(opts, crisim.WithPullBandwidth(int64(float64(r.Bandwidth)/r.Scale)))
	}
	for m, l := range crisim.RealisticLatencies() {
		opts = append(opts, crisim.WithLatency(m, Scaled(l, r.Scale)))
	}
	for _, img := range r.Images {
		opts = append(opts, crisim.WithRegistryImage(img.Ref, img.Size))
	}
	return opts
}

// Scaled multiplies every sample of l by f.
func Scaled(l crisim.Latency, f float64) crisim.Latency {
	return crisim.LatencyFunc(func(rng *rand.Rand) time.Duration {
		return time.Duration(float64(l.Sample(rng)) * f)
	})
}

// Median is the median of the realistic latency of method before scaling,
// estimated by sampling (the lower bound is computed from it).
func Median(method string) time.Duration {
	l, ok := crisim.RealisticLatencies()[method]
	if !ok {
		return 0
	}
	rng := rand.New(rand.NewPCG(1, 2))
	s := make([]time.Duration, 2001)
	for i := range s {
		s[i] = l.Sample(rng)
	}
	slices.Sort(s)
	return s[len(s)/2]
}

// Mean is the mean of the realistic latency of method before scaling,
// estimated by sampling.
func Mean(method string) time.Duration {
	l, ok := crisim.RealisticLatencies()[method]
	if !ok {
		return 0
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var sum time.Duration
	const n = 20000
	for i := 0; i < n; i++ {
		sum += l.Sample(rng)
	}
	return sum / n
}

// DefaultRuntime is a small node: 100 MB/s per download, 3 downloads at
// once (containerd's default), at most 16 runtime calls worked on at once,
// and the store lock that makes List calls queue behind mutations.
func DefaultRuntime(scale float64) Runtime {
	return Runtime{Scale: scale, Bandwidth: 100e6, MaxDownloads: 3, MaxConcurrency: 16, StoreLock: true, Seed: 42}
}

// PodOptions shape a generated pod.
type PodOptions struct {
	Name          string                   // the pod's name
	Namespace     string                   // default "default"
	Init          []string                 // images of regular init containers
	InitRun       time.Duration            // how long each init container runs before it exits 0
	Sidecars      []string                 // images of restartable init containers
	Containers    []string                 // images of regular containers
	RestartPolicy corev1.RestartPolicy     // default Always
	ExitAfter     map[string]time.Duration // container name → scripted exit
	ExitCode      map[string]int           // container name → code of its scripted exit
}

// Pod builds a pod: init containers "init-N" that run for InitRun,
// sidecars "sidecar-N", containers "app-N".
func Pod(o PodOptions) *corev1.Pod {
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.RestartPolicy == "" {
		o.RestartPolicy = corev1.RestartPolicyAlways
	}
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Annotations: map[string]string{}},
		Spec:       corev1.PodSpec{RestartPolicy: o.RestartPolicy},
	}
	always := corev1.ContainerRestartPolicyAlways
	for i, img := range o.Init {
		name := fmt.Sprintf("init-%d", i)
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: name, Image: img})
		p.Annotations[crisim.AnnotationExitAfter+"."+name] = o.InitRun.String()
	}
	for i, img := range o.Sidecars {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: fmt.Sprintf("sidecar-%d", i), Image: img, RestartPolicy: &always})
	}
	for i, img := range o.Containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("app-%d", i), Image: img})
	}
	for name, d := range o.ExitAfter {
		p.Annotations[crisim.AnnotationExitAfter+"."+name] = d.String()
	}
	for name, code := range o.ExitCode {
		p.Annotations[crisim.AnnotationExitCode+"."+name] = fmt.Sprint(code)
	}
	return p
}

// Images returns n registry images "registry.sim/app-K:1" of size each.
func Images(prefix string, n int, size int64) []Image {
	out := make([]Image, n)
	for i := range out {
		out[i] = Image{Ref: fmt.Sprintf("registry.sim/%s-%d:1", prefix, i), Size: size}
	}
	return out
}

// Demo is the orchestrator's demo: 20 web pods (an init container, a log
// sidecar, two app containers) over 8 images, a worker pod on a 1.2 GB
// image that must not hold the others up, and one pod that crash-loops.
func Demo() (Runtime, []*corev1.Pod) {
	rt := DefaultRuntime(1)
	imgs := Images("web", 6, 40e6)
	rt.Images = append(rt.Images, imgs...)
	rt.Images = append(rt.Images, Image{"registry.sim/init-db:1", 8e6}, Image{"registry.sim/log-agent:1", 12e6},
		Image{"registry.sim/ml-model:1", 1200e6}, Image{"registry.sim/flaky:1", 5e6})
	var pods []*corev1.Pod
	for i := 0; i < 20; i++ {
		pods = append(pods, Pod(PodOptions{
			Name: fmt.Sprintf("web-%02d", i), Init: []string{"registry.sim/init-db:1"}, InitRun: 300 * time.Millisecond,
			Sidecars:   []string{"registry.sim/log-agent:1"},
			Containers: []string{imgs[i%len(imgs)].Ref, imgs[(i+1)%len(imgs)].Ref},
		}))
	}
	pods = append(pods, Pod(PodOptions{Name: "ml-worker", Containers: []string{"registry.sim/ml-model:1"}}))
	pods = append(pods, Pod(PodOptions{Name: "flaky", Containers: []string{"registry.sim/flaky:1"},
		ExitAfter: map[string]time.Duration{"app-0": 1500 * time.Millisecond}, ExitCode: map[string]int{"app-0": 1}}))
	return rt, pods
}
