package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/virtualkubelet/provider"
)

// naiveProvider is how virtual-kubelet/cri works: CreatePod does
// everything inline (sandbox, then per container: inspect image, pull,
// create, start, one after another; init containers are waited for by
// polling), and GetPod lists every sandbox and container of the node.
type naiveProvider struct{ rt *criclient.Client }

func (n naiveProvider) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	sbs, err := n.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := n.rt.ListContainers(ctx, nil); err != nil {
		return nil, err
	}
	for _, sb := range sbs {
		if sb.GetMetadata().GetNamespace() == namespace && sb.GetMetadata().GetName() == name {
			return &corev1.Pod{}, nil
		}
	}
	return nil, errdefs.NotFound("no such pod")
}

func (n naiveProvider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	var extra map[string]map[string]string
	_ = json.Unmarshal([]byte(pod.Annotations[provider.AnnotationContainerAnnotations]), &extra)
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
		Labels:   map[string]string{"io.kubernetes.pod.uid": string(pod.UID)},
	}
	sb, err := n.rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		return err
	}
	run := func(c corev1.Container) (string, error) {
		st, err := n.rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: c.Image}, false)
		if err != nil {
			return "", err
		}
		if st.GetImage() == nil {
			if _, err := n.rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: c.Image}, nil, sbCfg); err != nil {
				return "", err
			}
		}
		id, err := n.rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name},
			Image:       &runtimeapi.ImageSpec{Image: c.Image},
			Annotations: extra[c.Name],
		}, sbCfg)
		if err != nil {
			return "", err
		}
		return id, n.rt.StartContainer(ctx, id)
	}
	for _, c := range pod.Spec.InitContainers {
		id, err := run(c)
		if err != nil {
			return err
		}
		for {
			st, err := n.rt.ContainerStatus(ctx, id, false)
			if err != nil {
				return err
			}
			if st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, c := range pod.Spec.Containers {
		if _, err := run(c); err != nil {
			return err
		}
	}
	return nil
}

// benchPod has one init container (300ms) and three regular containers,
// one of them from a 32 MiB image every pod shares.
func benchPod(i int) *corev1.Pod {
	pod := newPod(fmt.Sprintf("pod-%02d", i), types.UID(fmt.Sprintf("uid-bench-%02d", i)))
	pod.Annotations = map[string]string{provider.AnnotationContainerAnnotations: `{"init": {"` + crisim.AnnotationExitAfter + `": "300ms"}}`}
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: toolsImage}}
	pod.Spec.Containers = []corev1.Container{
		{Name: "app", Image: appImage}, {Name: "metrics", Image: toolsImage}, {Name: "logs", Image: toolsImage},
	}
	return pod
}

// BenchmarkPodBurst: 30 pods arrive at once at a node whose PodController
// has 2 sync workers (virtual-kubelet's default on 2 cores); each worker
// calls GetPod then CreatePod, as virtual-kubelet does. Per pod: the time
// from the burst until the pod is ready (all its containers started).
func BenchmarkPodBurst(b *testing.B) {
	const pods, workers = 30, 2
	for _, name := range []string{"syncpod", "naive-cri"} {
		b.Run("provider="+name, func(b *testing.B) {
			var lat []float64
			var makespan, lists float64
			for range b.N {
				b.StopTimer()
				srv, err := crisim.Start(crisim.WithRealisticLatencies(), crisim.WithStoreLock(), crisim.WithSeed(42),
					crisim.WithImage(toolsImage, 4<<20), crisim.WithRegistryImage(appImage, 32<<20), crisim.WithPullBandwidth(200<<20))
				if err != nil {
					b.Fatal(err)
				}
				cri, err := criclient.Dial(context.Background(), srv.Endpoint())
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				var mu sync.Mutex
				ready := map[string]time.Time{}
				allReady := make(chan struct{})
				markReady := func(name string) {
					mu.Lock()
					defer mu.Unlock()
					if _, ok := ready[name]; !ok {
						ready[name] = time.Now()
						if len(ready) == pods {
							close(allReady)
						}
					}
				}
				var create func(context.Context, *corev1.Pod) error
				var closeProv func()
				if name == "syncpod" {
					p, err := provider.New(ctx, cri.CRI(), cri.CRI())
					if err != nil {
						b.Fatal(err)
					}
					p.NotifyPods(ctx, func(pod *corev1.Pod) {
						for _, c := range pod.Status.Conditions {
							if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
								markReady(pod.Name)
							}
						}
					})
					create = func(ctx context.Context, pod *corev1.Pod) error {
						_, _ = p.GetPod(ctx, pod.Namespace, pod.Name)
						return p.CreatePod(ctx, pod)
					}
					closeProv = func() { _ = p.Close() }
				} else {
					n := naiveProvider{rt: cri}
					create = func(ctx context.Context, pod *corev1.Pod) error {
						_, _ = n.GetPod(ctx, pod.Namespace, pod.Name)
						if err := n.CreatePod(ctx, pod); err != nil {
							return err
						}
						markReady(pod.Name)
						return nil
					}
					closeProv = func() {}
				}
				srv.Runtime().ResetCalls()
				queue := make(chan *corev1.Pod, pods)
				for i := range pods {
					queue <- benchPod(i)
				}
				close(queue)
				b.StartTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for range workers {
					wg.Go(func() {
						for pod := range queue {
							if err := create(ctx, pod); err != nil {
								b.Error(err)
							}
						}
					})
				}
				wg.Wait()
				select {
				case <-allReady:
				case <-time.After(5 * time.Minute):
					b.Fatal("pods never all ready")
				}
				b.StopTimer()
				mu.Lock()
				var last time.Duration
				for _, t := range ready {
					d := t.Sub(start)
					lat = append(lat, float64(d.Milliseconds()))
					last = max(last, d)
				}
				mu.Unlock()
				makespan += float64(last.Milliseconds())
				lists += float64(srv.Runtime().Calls("ListContainers") + srv.Runtime().Calls("ListPodSandbox"))
				cancel()
				closeProv()
				_ = cri.Close()
				_ = srv.Close()
			}
			slices.Sort(lat)
			rank := func(q float64) float64 { return lat[int(q*float64(len(lat)-1)+0.5)] }
			b.ReportMetric(rank(0.5), "p50-ms")
			b.ReportMetric(rank(0.99), "p99-ms")
			b.ReportMetric(makespan/float64(b.N), "makespan-ms")
			b.ReportMetric(lists/float64(b.N), "lists/burst")
		})
	}
}
