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
