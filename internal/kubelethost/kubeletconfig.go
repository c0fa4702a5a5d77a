package kubelethost

import (
	"encoding/json"
	"strings"
)

// ports are the kubelet's TCP ports, all on 127.0.0.1.
type ports struct {
	// secure serves the authenticated API (/metrics, /pods, ...) over
	// HTTPS; readOnly the same without TLS; healthz a plain ping.
	secure, readOnly, healthz int
}

// layout names the files and directories of one kubelet, all below dir.
type layout struct {
	dir string
}

func (l layout) path(elem ...string) string {
	return strings.Join(append([]string{l.dir}, elem...), "/")
}

func (l layout) manifests() string     { return l.path("manifests") }
func (l layout) root() string          { return l.path("root") }
func (l layout) certs() string         { return l.path("certs") }
func (l layout) podLogs() string       { return l.path("pod-logs") }
func (l layout) volumePlugins() string { return l.path("volume-plugins") }
func (l layout) configFile() string    { return l.path("kubelet-config.json") }
func (l layout) logFile() string       { return l.path("kubelet.log") }
func (l layout) kubeconfig() string    { return l.path("kubeconfig") }

// kubeletConfig renders the KubeletConfiguration this machine needs: the
// kubelet runs standalone or registered (WithKubeconfig), on cgroup v1 without the right to
// raise rlimits, beside other kubelets and containerds, and must not change
// host settings the mount namespace does not cover (iptables, OOM score).
func kubeletConfig(c *config, l layout, p ports, endpoint string) ([]byte, error) {
	imageEndpoint := c.imageEndpoint
	if imageEndpoint == "" {
		imageEndpoint = endpoint
	}
	kc := map[string]any{
		"kind":                     "KubeletConfiguration",
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"staticPodPath":            l.manifests(),
		"fileCheckFrequency":       c.fileCheck.String(),
		"podLogsDir":               l.podLogs(),
		"volumePluginDir":          l.volumePlugins(),
		"containerRuntimeEndpoint": endpoint,
		"imageServiceEndpoint":     imageEndpoint,
		"cgroupDriver":             "cgroupfs",
		// No QoS cgroup tree and no node allocatable enforcement: the
		// kubelet would otherwise build and police a cgroup hierarchy
		// shared with every other kubelet on the machine.
		"cgroupsPerQOS":          false,
		"enforceNodeAllocatable": []string{},
		"failCgroupV1":           false,
		"failSwapOn":             false,
		"protectKernelDefaults":  false,
		"makeIPTablesUtilChains": false,
		"oomScoreAdj":            0,
		"registerNode":           false,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": true},
			"webhook":   map[string]any{"enabled": false},
		},
		"authorization":      map[string]any{"mode": "AlwaysAllow"},
		"address":            "127.0.0.1",
		"port":               p.secure,
		"readOnlyPort":       p.readOnly,
		"healthzBindAddress": "127.0.0.1",
		"healthzPort":        p.healthz,
		// The disk is shared with other work: the kubelet must neither
		// evict test pods nor collect their images because the disk
		// happens to be full.
		"evictionHard": map[string]string{
			"memory.available":  "1Mi",
			"nodefs.available":  "1%",
			"nodefs.inodesFree": "1%",
			"imagefs.available": "1%",
		},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
	}
	if c.kubeconfig != nil {
		kc["registerNode"] = true
		// Status as often as the kubelet's defaults, stated so the tests
		// that read the Node know the rhythm: status every 10 s when it
		// changes, the lease renewed every 10 s (a quarter of 40 s).
		kc["nodeStatusUpdateFrequency"] = "10s"
		kc["nodeLeaseDurationSeconds"] = 40
	}
	if c.maxRestart > 0 {
		kc["crashLoopBackOff"] = map[string]any{"maxContainerRestartPeriod": c.maxRestart.String()}
	}
	if c.parallelPulls != nil {
		kc["serializeImagePulls"] = false
		if *c.parallelPulls > 0 {
			kc["maxParallelImagePulls"] = *c.parallelPulls
		}
	}
	if c.pullQPS != nil {
		kc["registryPullQPS"] = *c.pullQPS
	}
	if len(c.featureGates) > 0 {
		kc["featureGates"] = c.featureGates
	}
	for _, edit := range c.configEdits {
		edit(kc)
	}
	return json.MarshalIndent(kc, "", "  ")
}
