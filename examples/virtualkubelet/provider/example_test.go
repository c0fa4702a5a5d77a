package provider_test

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/virtualkubelet/provider"
)

// A provider on a simulated runtime, driven by hand the way
// virtual-kubelet's PodController drives it.
func Example() {
	srv, err := crisim.Start(
		crisim.WithVersion("containerd", "simulated"),
		crisim.WithRegistryImage("docker.io/library/nginx:1.27", 8<<20))
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()
	cri, err := criclient.Dial(ctx, srv.Endpoint())
	if err != nil {
		panic(err)
	}
	defer cri.Close()
	p, err := provider.New(ctx, cri.CRI(), cri.CRI())
	if err != nil {
		panic(err)
	}
	defer p.Close()

	ready := make(chan *corev1.Pod, 1)
	notifyCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.NotifyPods(notifyCtx, func(pod *corev1.Pod) {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				select {
				case ready <- pod:
				default:
				}
			}
		}
	})

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
	}
	// CreatePod returns at once: the pull and the start run in the background.
	if err := p.CreatePod(ctx, pod); err != nil {
		panic(err)
	}
	got := <-ready
	cs := got.Status.ContainerStatuses[0]
	fmt.Println(got.Status.Phase, cs.Name, cs.State.Running != nil, strings.HasPrefix(cs.ContainerID, "containerd://"))
	// Output: Running nginx true true
}
