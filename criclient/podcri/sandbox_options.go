package podcri

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// SandboxOption sets a SandboxConfig parameter. A nil SandboxOption is
// ignored.
type SandboxOption func(*sandboxSettings)

type sandboxSettings struct {
	attempt      uint32
	podLogRoot   string
	dns          *runtimeapi.DNSConfig
	cgroupParent string
	nodeNetwork  bool
}

// WithAttempt sets the sandbox's attempt number (0 for the first sandbox of
// a pod, one more for each new sandbox).
func WithAttempt(n uint32) SandboxOption { return func(s *sandboxSettings) { s.attempt = n } }

// WithPodLogRoot sets the root of the pod log directories: the sandbox's
// LogDirectory becomes <root>/<namespace>_<name>_<uid>, as the kubelet
// builds it under /var/log/pods. Empty (the default) leaves LogDirectory
// empty; the caller creates the directory.
func WithPodLogRoot(root string) SandboxOption {
	return func(s *sandboxSettings) { s.podLogRoot = root }
}

// WithDNSConfig sets the sandbox's DNS config. Without it DnsConfig is nil
// and the runtime keeps the image's resolv.conf.
func WithDNSConfig(dns *runtimeapi.DNSConfig) SandboxOption {
	return func(s *sandboxSettings) { s.dns = dns }
}

// WithCgroupParent sets the sandbox's Linux cgroup parent.
func WithCgroupParent(parent string) SandboxOption {
	return func(s *sandboxSettings) { s.cgroupParent = parent }
}

// WithNodeNetwork puts the sandbox in the node's network namespace whatever
// pod.Spec.HostNetwork says, and leaves Hostname empty as for a host-network
// pod: for a front-end without CNI, whose pods cannot have a network of
// their own.
func WithNodeNetwork() SandboxOption { return func(s *sandboxSettings) { s.nodeNetwork = true } }
