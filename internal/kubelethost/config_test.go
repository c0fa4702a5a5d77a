package kubelethost

import (
	"encoding/json"
	"testing"
	"time"
)

// TestKubeletConfig checks the settings without which the kubelet does not
// run on these machines, or changes them.
func TestKubeletConfig(t *testing.T) {
	c := config{fileCheck: 5 * time.Second, maxRestart: 2 * time.Second, featureGates: map[string]bool{"EventedPLEG": true}}
	WithConfigEdit(func(kc map[string]any) { kc["syncFrequency"] = "30s" })(&c)
	b, err := kubeletConfig(&c, layout{dir: "/tmp/kh"}, ports{secure: 1, readOnly: 2, healthz: 3}, "unix:///tmp/c.sock")
	if err != nil {
		t.Fatal(err)
	}
	var kc map[string]any
	if err := json.Unmarshal(b, &kc); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"kind":                     "KubeletConfiguration",
		"staticPodPath":            "/tmp/kh/manifests",
		"podLogsDir":               "/tmp/kh/pod-logs",
		"containerRuntimeEndpoint": "unix:///tmp/c.sock",
		"imageServiceEndpoint":     "unix:///tmp/c.sock",
		"cgroupDriver":             "cgroupfs",
		"cgroupsPerQOS":            false,
		"failCgroupV1":             false,
		"failSwapOn":               false,
		"protectKernelDefaults":    false,
		"makeIPTablesUtilChains":   false,
		"registerNode":             false,
		"address":                  "127.0.0.1",
		"port":                     1.0,
		"readOnlyPort":             2.0,
		"healthzPort":              3.0,
		"fileCheckFrequency":       "5s",
		"syncFrequency":            "30s",
	} {
		if kc[key] != want {
			t.Errorf("%s = %v, want %v", key, kc[key], want)
		}
	}
	if m := kc["authorization"].(map[string]any)["mode"]; m != "AlwaysAllow" {
		t.Errorf("authorization mode %v", m)
	}
	if r := kc["crashLoopBackOff"].(map[string]any)["maxContainerRestartPeriod"]; r != "2s" {
		t.Errorf("maxContainerRestartPeriod %v", r)
	}
	if g := kc["featureGates"].(map[string]any)["EventedPLEG"]; g != true {
		t.Errorf("featureGates %v", kc["featureGates"])
	}
}

// The pull tuning renders as the kubelet's fields; without it the kubelet
// keeps its serial pulls and its QPS limit.
func TestKubeletConfigPullTuning(t *testing.T) {
	render := func(opts ...Option) map[string]any {
		t.Helper()
		c := config{fileCheck: 5 * time.Second}
		for _, o := range opts {
			o(&c)
		}
		if c.err != nil {
			t.Fatal(c.err)
		}
		b, err := kubeletConfig(&c, layout{dir: "/tmp/kh"}, ports{secure: 1, readOnly: 2, healthz: 3}, "unix:///tmp/c.sock")
		if err != nil {
			t.Fatal(err)
		}
		var kc map[string]any
		if err := json.Unmarshal(b, &kc); err != nil {
			t.Fatal(err)
		}
		return kc
	}
	for _, tc := range []struct {
		name string
		opts []Option
		want map[string]any // nil: the key is absent
	}{
		{"defaults", nil, map[string]any{"serializeImagePulls": nil, "maxParallelImagePulls": nil, "registryPullQPS": nil}},
		{"tuned", []Option{WithParallelImagePulls(10), WithRegistryPullQPS(0)},
			map[string]any{"serializeImagePulls": false, "maxParallelImagePulls": 10.0, "registryPullQPS": 0.0}},
		{"unlimited", []Option{WithParallelImagePulls(0), WithRegistryPullQPS(20)},
			map[string]any{"serializeImagePulls": false, "maxParallelImagePulls": nil, "registryPullQPS": 20.0}},
	} {
		kc := render(tc.opts...)
		for key, want := range tc.want {
			if got, ok := kc[key]; want == nil && ok || want != nil && got != want {
				t.Errorf("%s: %s = %v (set %v), want %v", tc.name, key, got, ok, want)
			}
		}
	}
}
