package podcri

import (
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SandboxConfig is the CRI config of pod's sandbox, as the kubelet builds it:
//   - Metadata: the pod's name, namespace and uid, and the attempt (WithAttempt).
//   - Labels: the pod's labels plus io.kubernetes.pod.name, .namespace and
//     .uid; those three win over a pod label of the same key.
//   - Annotations: a copy of the pod's annotations.
//   - Hostname: the pod name, except in the node's network namespace (host
//     network or WithNodeNetwork), where runc cannot set one.
//   - LogDirectory: <root>/<namespace>_<name>_<uid> with WithPodLogRoot.
//   - DnsConfig: only with WithDNSConfig.
//   - PortMappings: one per container port (init containers included).
//   - Linux: namespace options (see NamespaceOptions), cgroup parent
//     (WithCgroupParent), and the pod security context's runAsUser,
//     runAsGroup, supplemental groups and sysctls.
//
// A nil pod is an *ArgError.
func SandboxConfig(pod *corev1.Pod, opts ...SandboxOption) (*runtimeapi.PodSandboxConfig, error) {
	if pod == nil {
		return nil, &ArgError{Method: "SandboxConfig", Arg: "pod", Reason: "must not be nil"}
	}
	var s sandboxSettings
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	labels := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[LabelPodName], labels[LabelPodNamespace], labels[LabelPodUID] = pod.Name, pod.Namespace, string(pod.UID)
	annotations := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	ns := NamespaceOptions(pod)
	if s.nodeNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: s.attempt,
		},
		Labels:       labels,
		Annotations:  annotations,
		DnsConfig:    s.dns,
		PortMappings: portMappings(pod),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    s.cgroupParent,
			SecurityContext: sandboxSecurityContext(pod, ns),
		},
	}
	if ns.Network != runtimeapi.NamespaceMode_NODE {
		cfg.Hostname = pod.Name
	}
	if s.podLogRoot != "" {
		cfg.LogDirectory = filepath.Join(s.podLogRoot, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
	}
	if sc := pod.Spec.SecurityContext; sc != nil && len(sc.Sysctls) > 0 {
		cfg.Linux.Sysctls = make(map[string]string, len(sc.Sysctls))
		for _, sy := range sc.Sysctls {
			cfg.Linux.Sysctls[sy.Name] = sy.Value
		}
	}
	return cfg, nil
}

// NamespaceOptions maps the pod's namespace fields as the kubelet does:
// network POD (NODE with hostNetwork), PID CONTAINER (NODE with hostPID,
// POD with shareProcessNamespace), IPC POD (NODE with hostIPC).
func NamespaceOptions(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod == nil {
		return ns
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

func portMappings(pod *corev1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			for _, p := range c.Ports {
				out = append(out, &runtimeapi.PortMapping{
					Protocol:      protocol(p.Protocol),
					ContainerPort: p.ContainerPort,
					HostPort:      p.HostPort,
					HostIp:        p.HostIP,
				})
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	return out
}

func protocol(p corev1.Protocol) runtimeapi.Protocol {
	switch p {
	case corev1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case corev1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	default:
		return runtimeapi.Protocol_TCP
	}
}

func sandboxSecurityContext(pod *corev1.Pod, ns *runtimeapi.NamespaceOption) *runtimeapi.LinuxSandboxSecurityContext {
	out := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns}
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return out
	}
	if sc.RunAsUser != nil {
		out.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
	}
	if sc.RunAsGroup != nil {
		out.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
	}
	if sc.FSGroup != nil {
		out.SupplementalGroups = append(out.SupplementalGroups, *sc.FSGroup)
	}
	out.SupplementalGroups = append(out.SupplementalGroups, sc.SupplementalGroups...)
	if sc.SeccompProfile != nil {
		out.Seccomp = seccomp(sc.SeccompProfile)
	}
	return out
}
