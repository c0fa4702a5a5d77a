package kubelethost_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/kubelethost"
	"github.com/syncpod/syncpod/internal/testnode"
)

// hostState is what the kubelet would change on the machine if its mount
// namespace did not cover it.
func hostState(t *testing.T) map[string]string {
	t.Helper()
	st := map[string]string{}
	for _, f := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"} {
		b, err := os.ReadFile("/proc/sys/" + f)
		if err != nil {
			continue
		}
		st[f] = strings.TrimSpace(string(b))
	}
	for _, p := range []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods"} {
		_, err := os.Stat(p)
		st[p] = map[bool]string{true: "absent", false: "present"}[os.IsNotExist(err)]
	}
	return st
}

// TestRealNodeKubeletHost runs the kubelet on a test node with one static
// pod: the pod's container runs, healthz answers, the PLEG metrics are
// read, removing the manifest stops the pod, and the machine's sysctls and
// /var directories are as they were.
func TestRealNodeKubeletHost(t *testing.T) {
	n := testnode.Start(t)
	before := hostState(t)
	img := n.PushImage(t, "kh/app")
	k := kubelethost.Start(t, n.Endpoint, kubelethost.WithNodeName("kh-realnode"), kubelethost.WithVerbosity(1),
		kubelethost.WithFileCheckFrequency(2*time.Second), kubelethost.WithStopTimeout(30*time.Second),
		kubelethost.WithImageEndpoint(n.Endpoint), kubelethost.WithStartTimeout(3*time.Minute))
	if k.NodeName != "kh-realnode" || k.PodName("hello") != "hello-kh-realnode" {
		t.Errorf("node name %q, pod name %q", k.NodeName, k.PodName("hello"))
	}

	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "app", Image: img, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"},
			}},
		},
	}
	if err := k.WriteStaticPod(pod); err != nil {
		t.Fatal(err)
	}
	rt := n.RuntimeService()
	waitFor(t, "the static pod's container to run", 3*time.Minute, func() (bool, string) {
		cs := containers(t, rt, k.PodName("hello"))
		for _, c := range cs {
			if c.GetMetadata().GetName() == "app" && c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return true, ""
			}
		}
		return false, k.Tail(5)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := k.Healthz(ctx); err != nil {
		t.Errorf("healthz: %v", err)
	}
	waitFor(t, "a PLEG relist in the metrics", time.Minute, func() (bool, string) {
		h, err := k.Histogram(ctx, kubelethost.RelistDurationMetric)
		if err != nil {
			return false, err.Error()
		}
		return h.Count > 0, h.String()
	})
	h, _ := k.Histogram(ctx, kubelethost.RelistDurationMetric)
	t.Logf("%v", h)
	sli, err := k.Histogram(ctx, kubelethost.PodStartMetric)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v", sli)

	if err := k.RemoveStaticPod("hello"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removed pod's containers to stop", 3*time.Minute, func() (bool, string) {
		for _, c := range containers(t, rt, k.PodName("hello")) {
			if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return false, c.GetState().String()
			}
		}
		return true, ""
	})
	if errs, err := k.CRIErrors(); err != nil {
		t.Fatal(err)
	} else {
		for _, e := range errs {
			t.Logf("CRI error in the kubelet log: %s", e.Raw)
		}
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for name, err := range map[string]error{
		"Healthz":         k.Healthz(ctx),
		"WriteStaticPod":  k.WriteStaticPod(pod),
		"RemoveStaticPod": k.RemoveStaticPod("hello"),
		"Log":             second(k.Log()),
	} {
		if !errors.Is(err, kubelethost.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if _, err := k.Metrics(ctx); !errors.Is(err, kubelethost.ErrClosed) {
		t.Errorf("Metrics after Close = %v, want ErrClosed", err)
	}
	if _, err := os.Stat(k.Dir); !os.IsNotExist(err) {
		t.Errorf("Close left %s (%v)", k.Dir, err)
	}
	after := hostState(t)
	for key, v := range before {
		if after[key] != v {
			t.Errorf("host %s changed: %s -> %s", key, v, after[key])
		}
	}
}

func containers(t *testing.T, rt runtimeapi.RuntimeServiceClient, podName string) []*runtimeapi.Container {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.name": podName},
	}})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	return resp.GetContainers()
}

// waitFor polls cond every 250ms until it holds, failing t with cond's last
// note after timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, note := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, note)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
