package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/controlplane"
	"github.com/syncpod/syncpod/internal/testnode"
)

// kubeClient is a clientset for cp on an HTTP client of its own, whose
// idle connections the test closes at the end.
func kubeClient(t testing.TB, cp *controlplane.ControlPlane) kubernetes.Interface {
	cfg := &rest.Config{Host: cp.URL, BearerToken: cp.Token, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CAData},
		QPS: 200, Burst: 400}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	kube, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// The command's node on a real kube-apiserver and etcd, its pods on real
// containerd: the node registers Ready and renews its Lease; pods created
// through the API reach Running with the statuses kubectl shows (Ready
// condition, container IDs, restart counts) and events; an API server
// restart in the middle of the burst loses no pod; a graceful delete
// completes and leaves nothing on the runtime.
func TestRealNodeVirtualKubeletOnAPIServer(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "vk/app", testnode.WithSize(1<<20))
	cp := controlplane.Start(t)
	kube := kubeClient(t, cp)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	o := options{nodeName: "vk-real", endpoint: n.Endpoint, podLogDir: filepath.Join(n.Dir, "pods"), nodeIP: "127.0.0.1",
		taint: true, workers: 4, capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}}
	go func() { done <- runNode(ctx, kube, o, zap.NewNop()) }()
	t.Cleanup(func() { // before the control plane and the node go
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runNode: %v", err)
		}
	})

	eventually(t, "a Ready node with a Lease", func() string {
		nd, err := kube.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if !nodeReady(nd) {
			return fmt.Sprintf("conditions %v", nd.Status.Conditions)
		}
		l, err := kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, o.nodeName, metav1.GetOptions{})
		if err != nil {
			return "lease: " + err.Error()
		}
		if l.Spec.RenewTime == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != o.nodeName {
			return fmt.Sprintf("lease %+v", l.Spec)
		}
		return ""
	})

	const pods = 12
	create := func(i int) {
		grace := int64(5)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("web-%d", i)},
			Spec: corev1.PodSpec{NodeName: o.nodeName, HostNetwork: true, TerminationGracePeriodSeconds: &grace,
				Tolerations: []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{
					{Name: "app", Image: img},
					{Name: "side", Image: img, Args: []string{"pause"}},
				}},
		}
		if _, err := kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", p.Name, err)
		}
	}
	for i := range pods / 2 {
		create(i)
	}
	if err := cp.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	for i := pods / 2; i < pods; i++ {
		create(i)
	}

	eventually(t, "every pod Running and Ready", func() string {
		list, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		if len(list.Items) != pods {
			return fmt.Sprintf("%d pods in the API", len(list.Items))
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Status.Phase != corev1.PodRunning || podCondition(p, corev1.PodReady) != corev1.ConditionTrue {
				return fmt.Sprintf("%s: phase %s ready %s", p.Name, p.Status.Phase, podCondition(p, corev1.PodReady))
			}
			if len(p.Status.ContainerStatuses) != 2 {
				return fmt.Sprintf("%s: %d container statuses", p.Name, len(p.Status.ContainerStatuses))
			}
			for _, cs := range p.Status.ContainerStatuses {
				if !strings.Contains(cs.ContainerID, "://") || cs.State.Running == nil || !cs.Ready || cs.RestartCount != 0 {
					return fmt.Sprintf("%s/%s: %+v", p.Name, cs.Name, cs)
				}
			}
			if p.Status.PodIP != o.nodeIP || p.Status.StartTime == nil {
				return fmt.Sprintf("%s: podIP %q startTime %v", p.Name, p.Status.PodIP, p.Status.StartTime)
			}
		}
		return ""
	})
	sandboxes, err := n.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sandboxes.Items) != pods {
		t.Fatalf("%d sandboxes on containerd for %d pods", len(sandboxes.Items), pods)
	}
	events, err := kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "web-0").String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Error("no events for pod web-0")
	}
	for _, e := range events.Items {
		t.Logf("event for web-0: %s %s: %s", e.Type, e.Reason, e.Message)
	}

	if err := kube.CoreV1().Pods("default").Delete(ctx, "web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-0 gone from the API and the runtime", func() string {
		if _, err := kube.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{}); err == nil {
			return "still in the API"
		}
		sbs, err := n.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{
			Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.name": "web-0"}}})
		if err != nil {
			return err.Error()
		}
		if len(sbs.Items) != 0 {
			return fmt.Sprintf("%d sandboxes left", len(sbs.Items))
		}
		return ""
	})
}
