package kubelethost_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncpod/syncpod/internal/controlplane"
	"github.com/syncpod/syncpod/internal/kubelethost"
	"github.com/syncpod/syncpod/internal/testnode"
)

// TestRealNodeKubeletRegistered runs the kubelet registered to a real API
// server: it creates its Node, which turns Ready with the kubelet's reason,
// renews its Lease, and mirrors a static pod into the API.
func TestRealNodeKubeletRegistered(t *testing.T) {
	cp := controlplane.Start(t)
	// A registered kubelet is Ready only with the runtime's network ready,
	// which needs a CNI network.
	n := testnode.Start(t, testnode.WithPodNetwork())
	img := n.PushImage(t, "kh/registered")
	const node = "kh-registered"
	k := kubelethost.Start(t, n.Endpoint, kubelethost.WithNodeName(node),
		kubelethost.WithKubeconfig(cp.Kubeconfig()), kubelethost.WithStartTimeout(3*time.Minute),
		kubelethost.WithFileCheckFrequency(2*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var ready corev1.NodeCondition
	waitFor(t, "the Node to be Ready in the API server", 3*time.Minute, func() (bool, string) {
		var nd corev1.Node
		if err := cp.GetJSON(ctx, "/api/v1/nodes/"+node, &nd); err != nil {
			return false, err.Error()
		}
		for _, c := range nd.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c
				return c.Status == corev1.ConditionTrue, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return false, "no Ready condition"
	})
	if ready.Reason != "KubeletReady" {
		t.Errorf("Ready reason %q (message %q), want KubeletReady", ready.Reason, ready.Message)
	}
	t.Logf("Ready: %s %s: %s", ready.Status, ready.Reason, ready.Message)

	var first coordinationv1.Lease
	waitFor(t, "the node's Lease", 2*time.Minute, func() (bool, string) {
		err := cp.GetJSON(ctx, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"+node, &first)
		return err == nil, fmt.Sprint(err)
	})
	if first.Spec.HolderIdentity == nil || *first.Spec.HolderIdentity != node || first.Spec.RenewTime == nil {
		t.Fatalf("Lease spec %+v: want holder %s and a renew time", first.Spec, node)
	}
	waitFor(t, "the Lease to be renewed", 2*time.Minute, func() (bool, string) {
		var l coordinationv1.Lease
		if err := cp.GetJSON(ctx, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"+node, &l); err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(first.Spec.RenewTime.Time), fmt.Sprint(l.Spec.RenewTime)
	})

	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mirrored", Namespace: "default"},
		Spec: corev1.PodSpec{
			HostNetwork: true, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "app", Image: img, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"}}},
		},
	}
	if err := k.WriteStaticPod(pod); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/namespaces/default/pods/" + k.PodName("mirrored")
	waitFor(t, "the mirror pod to be Running in the API server", 3*time.Minute, func() (bool, string) {
		var p corev1.Pod
		if err := cp.GetJSON(ctx, path, &p); err != nil {
			return false, err.Error()
		}
		if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; !ok {
			return false, fmt.Sprintf("no %s annotation: %v", corev1.MirrorPodAnnotationKey, p.Annotations)
		}
		return p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node, fmt.Sprintf("%s on %q", p.Status.Phase, p.Spec.NodeName)
	})
	if err := k.RemoveStaticPod("mirrored"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mirror pod to be deleted", 3*time.Minute, func() (bool, string) {
		var p corev1.Pod
		err := cp.GetJSON(ctx, path, &p)
		var se *controlplane.StatusError
		return errors.As(err, &se) && se.Code == 404, fmt.Sprint(err)
	})
}
