package provider_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/virtualkubelet/provider"
)

// waitTimeout is how long a test waits for a condition. It is generous on
// purpose: reaching it is a failure (something never happened), not a
// speed measurement.
const waitTimeout = 60 * time.Second

const (
	testNamespace = "default"
	testNode      = "vk-test"
	appImage      = "registry.test/app:1"
	toolsImage    = "registry.test/tools:1"
)

// recorder wraps the provider to see every status handed to
// virtual-kubelet through NotifyPods.
type recorder struct {
	*provider.Provider
	mu   sync.Mutex
	seen []*corev1.Pod
}

var _ node.PodNotifier = (*recorder)(nil)

func (r *recorder) NotifyPods(ctx context.Context, cb func(*corev1.Pod)) {
	r.Provider.NotifyPods(ctx, func(p *corev1.Pod) {
		r.mu.Lock()
		r.seen = append(r.seen, p.DeepCopy())
		r.mu.Unlock()
		cb(p)
	})
}

// notified returns the statuses notified for uid, in order.
func (r *recorder) notified(uid types.UID) []*corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*corev1.Pod
	for _, p := range r.seen {
		if p.UID == uid {
			out = append(out, p)
		}
	}
	return out
}

// system is a virtual-kubelet PodController over a fake clientset, driving
// the provider on a crisim runtime.
type system struct {
	t       *testing.T
	srv     *crisim.Server
	cri     *criclient.Client
	prov    *provider.Provider
	rec     *recorder
	client  *fake.Clientset
	ctx     context.Context
	nextUID int
}

func startCrisim(t *testing.T, opts ...crisim.Option) (*crisim.Server, *criclient.Client) {
	t.Helper()
	srv, err := crisim.Start(append([]crisim.Option{
		crisim.WithVersion("containerd", "2.4.2-crisim"),
		crisim.WithImage(toolsImage, 4<<20),
		crisim.WithRegistryImage(appImage, 16<<20),
		crisim.WithPullBandwidth(256 << 20),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := criclient.Dial(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return srv, c
}

func newProvider(t *testing.T, rt *criclient.Client, opts ...provider.Option) *provider.Provider {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	p, err := provider.New(ctx, rt.CRI(), rt.CRI(), append([]provider.Option{provider.WithNodeName(testNode), provider.WithNodeIP("192.0.2.10")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// startSystem wires virtual-kubelet's PodController to the provider, as
// virtual-kubelet's own tests do.
func startSystem(t *testing.T, srv *crisim.Server, cri *criclient.Client, opts ...provider.Option) *system {
	t.Helper()
	prov := newProvider(t, cri, opts...)
	rec := &recorder{Provider: prov}
	client := fake.NewClientset()
	// The fake tracker does not bump resource versions on update; the
	// PodController relies on them, so do it as virtual-kubelet's tests do.
	client.PrependReactor("update", "pods", func(action ktesting.Action) (bool, runtime.Object, error) {
		pod := action.(ktesting.UpdateAction).GetObject().(*corev1.Pod)
		rv, _ := strconv.Atoi(pod.ResourceVersion)
		pod.ResourceVersion = strconv.Itoa(rv + 1)
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	factory := kubeinformers.NewSharedInformerFactory(client, time.Minute)
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:         client.CoreV1(),
		PodInformer:       factory.Core().V1().Pods(),
		EventRecorder:     &record.FakeRecorder{}, // nil Events channel: events are dropped
		Provider:          rec,
		ConfigMapInformer: factory.Core().V1().ConfigMaps(),
		SecretInformer:    factory.Core().V1().Secrets(),
		ServiceInformer:   factory.Core().V1().Services(),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = pc.Run(ctx, 2)
	}()
	t.Cleanup(func() {
		cancel()
		<-runDone
		factory.Shutdown()
	})
	select {
	case <-pc.Ready():
	case <-pc.Done():
		t.Fatalf("pod controller stopped: %v", pc.Err())
	case <-time.After(waitTimeout):
		t.Fatal("pod controller never became ready")
	}
	return &system{t: t, srv: srv, cri: cri, prov: prov, rec: rec, client: client, ctx: ctx}
}

func (s *system) create(pod *corev1.Pod) *corev1.Pod {
	s.t.Helper()
	out, err := s.client.CoreV1().Pods(pod.Namespace).Create(s.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// waitPod waits until the API server's copy of the pod satisfies cond and
// returns it. cond returns "" when satisfied, else what it still waits for.
func (s *system) waitPod(name string, what string, cond func(*corev1.Pod) string) *corev1.Pod {
	s.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	last := ""
	for {
		pod, err := s.client.CoreV1().Pods(testNamespace).Get(s.ctx, name, metav1.GetOptions{})
		if err == nil {
			if last = cond(pod); last == "" {
				return pod
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("pod %s: never %s; last: %s", name, what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *system) waitGone(name string) {
	s.t.Helper()
	eventually(s.t, "pod "+name+" removed from the API", func() string {
		_, err := s.client.CoreV1().Pods(testNamespace).Get(s.ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("get: %v", err)
	})
}

// eventually polls cond until it returns "" (or fails the test with its
// last answer after waitTimeout).
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		last := cond()
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %s; last: %s", what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sandboxesOf lists the runtime's sandboxes of a pod.
func sandboxesOf(t *testing.T, rt *criclient.Client, uid types.UID) []*runtimeapi.PodSandbox {
	t.Helper()
	sbs, err := rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(uid)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sbs
}

func containersOf(t *testing.T, rt *criclient.Client, uid types.UID) []*runtimeapi.Container {
	t.Helper()
	cs, err := rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(uid)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func newPod(name string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, UID: uid, ResourceVersion: "1"},
		Spec: corev1.PodSpec{
			NodeName:      testNode,
			RestartPolicy: corev1.RestartPolicyAlways,
		},
	}
}

func sidecarPolicy() *corev1.ContainerRestartPolicy {
	p := corev1.ContainerRestartPolicyAlways
	return &p
}

func findStatus(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func waitingReason(cs *corev1.ContainerStatus) string {
	if cs == nil || cs.State.Waiting == nil {
		return ""
	}
	return cs.State.Waiting.Reason
}
