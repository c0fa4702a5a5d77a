package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// envRunNode makes the test binary run the command itself (its flags
// after the binary's name) instead of the tests: the many-nodes test starts
// its node processes this way, so it needs no separate build.
const envRunNode = "SYNCPOD_VK_RUN_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(envRunNode) == "1" {
		if err := run(); err != nil {
			fmt.Fprintln(os.Stderr, "syncpod-vk:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m,
		// go.opencensus.io/stats/view starts this worker in its package
		// init (it is imported by virtual-kubelet's nodeutil through its
		// tracing); it lives as long as the process and cannot be stopped.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// waitTimeout is generous: reaching it is a failure, not a measurement.
const waitTimeout = 2 * time.Minute

func eventually(t testing.TB, what string, cond func() string) {
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
		time.Sleep(50 * time.Millisecond)
	}
}

// The command's node on a fake cluster: it registers a Ready, tainted
// node, and a pod bound to it runs.
func TestRunNodeOnFakeCluster(t *testing.T) {
	kube := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	o := options{nodeName: "vk", taint: true, workers: 2, nodeIP: "192.0.2.1",
		capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}
	go func() { done <- runNode(ctx, kube, o, zap.NewNop()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runNode: %v", err)
		}
	}()

	eventually(t, "a Ready node", func() string {
		n, err := kube.CoreV1().Nodes().Get(ctx, "vk", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "virtual-kubelet.io/provider" {
					return fmt.Sprintf("taints %v", n.Spec.Taints)
				}
				return ""
			}
		}
		return fmt.Sprintf("conditions %v", n.Status.Conditions)
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web", ResourceVersion: "1"},
		Spec: corev1.PodSpec{NodeName: "vk", RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	}
	if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod running", func() string {
		p, err := kube.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if p.Status.Phase != corev1.PodRunning {
			return "phase " + string(p.Status.Phase)
		}
		return ""
	})
}

// -nodes: one process runs several nodes, named after the prefix, each
// registered Ready; stopping the process stops them all.
func TestRunNodesRegistersEachNode(t *testing.T) {
	kube := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	o := options{nodeName: "hollow", workers: 1, nodeIP: "192.0.2.1",
		capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}
	clients := 0
	go func() {
		done <- runNodes(ctx, 3, o, zap.NewNop(), func() (kubernetes.Interface, error) { clients++; return kube, nil })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runNodes: %v", err)
		}
		if clients != 3 {
			t.Errorf("%d API clients made, want one per node (3)", clients)
		}
	}()
	for _, name := range []string{"hollow-00", "hollow-01", "hollow-02"} {
		eventually(t, name+" Ready", func() string {
			n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if !nodeReady(n) {
				return fmt.Sprintf("conditions %v", n.Status.Conditions)
			}
			return ""
		})
	}
}

// A client that cannot be made fails runNodes before any node starts.
func TestRunNodesClientError(t *testing.T) {
	boom := errors.New("no kubeconfig")
	err := runNodes(context.Background(), 2, options{nodeName: "x"}, zap.NewNop(),
		func() (kubernetes.Interface, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("runNodes = %v, want %v", err, boom)
	}
}
