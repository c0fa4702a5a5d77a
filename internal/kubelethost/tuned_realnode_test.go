package kubelethost_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/kubelethost"
	"github.com/syncpod/syncpod/internal/testnode"
)

// TestRealNodeKubeletTuned runs the kubelet tuned for a burst: parallel
// image pulls, no pull QPS limit and the EventedPLEG gate. Kubelet v1.37.2
// accepts the gate (ALPHA, default false): it starts, its /configz holds
// the three settings and the gate, its feature metric says the gate is on,
// its evented PLEG connects to containerd's event stream, and a static
// pod runs.
func TestRealNodeKubeletTuned(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "kh/tuned")
	k := kubelethost.Start(t, n.Endpoint, kubelethost.WithParallelImagePulls(10), kubelethost.WithRegistryPullQPS(0),
		kubelethost.WithFeatureGate("EventedPLEG", true), kubelethost.WithStartTimeout(3*time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	body, err := k.Configz(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cz struct {
		KubeletConfig struct {
			SerializeImagePulls   *bool           `json:"serializeImagePulls"`
			MaxParallelImagePulls *int            `json:"maxParallelImagePulls"`
			RegistryPullQPS       *int            `json:"registryPullQPS"`
			FeatureGates          map[string]bool `json:"featureGates"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal([]byte(body), &cz); err != nil {
		t.Fatalf("configz: %v: %s", err, body)
	}
	kc := cz.KubeletConfig
	if kc.SerializeImagePulls == nil || *kc.SerializeImagePulls || kc.MaxParallelImagePulls == nil || *kc.MaxParallelImagePulls != 10 ||
		kc.RegistryPullQPS == nil || *kc.RegistryPullQPS != 0 || !kc.FeatureGates["EventedPLEG"] {
		t.Fatalf("configz: %s; want serializeImagePulls false, maxParallelImagePulls 10, registryPullQPS 0, EventedPLEG on", body)
	}

	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tuned", Namespace: "default"},
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
	waitFor(t, "the static pod's container to run", 3*time.Minute, func() (bool, string) {
		for _, c := range containers(t, n.RuntimeService(), k.PodName("tuned")) {
			if c.GetMetadata().GetName() == "app" && c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return true, ""
			}
		}
		return false, k.Tail(5)
	})

	text, err := k.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := kubelethost.ParseText(text)
	if err != nil {
		t.Fatal(err)
	}
	gate := -1.0
	for _, s := range samples {
		if s.Name == "kubernetes_feature_enabled" && s.Labels["name"] == "EventedPLEG" {
			gate = s.Value
		}
	}
	if gate != 1 {
		t.Errorf("kubernetes_feature_enabled{name=\"EventedPLEG\"} = %v, want 1", gate)
	}
	// The evented PLEG has opened containerd's event stream (a stream
	// that failed would count errors and, after 5, fall back for good).
	if ok, _ := kubelethost.Value(samples, "kubelet_evented_pleg_connection_success_count"); ok < 1 {
		t.Errorf("kubelet_evented_pleg_connection_success_count = %v, want at least 1", ok)
	}
	if bad, _ := kubelethost.Value(samples, "kubelet_evented_pleg_connection_error_count"); bad != 0 {
		t.Errorf("kubelet_evented_pleg_connection_error_count = %v, want 0", bad)
	}
	entries, err := k.Log()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Severity == 'E' && (strings.Contains(e.Raw, "feature gate") || strings.Contains(e.Raw, "EventedPLEG")) {
			t.Errorf("kubelet: %s", e.Raw)
		}
	}
}
