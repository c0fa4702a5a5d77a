package podcri

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "default", UID: "u1",
			Labels:      map[string]string{"app": "web", LabelPodName: "spoof"},
			Annotations: map[string]string{"note": "x"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "nginx",
			Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}},
		}}},
	}
}

func TestSandboxConfig(t *testing.T) {
	yes := true
	uid, gid, fs := int64(1000), int64(2000), int64(3000)
	cases := []struct {
		name  string
		mod   func(*corev1.Pod)
		opts  []SandboxOption
		check func(*testing.T, *runtimeapi.PodSandboxConfig)
	}{
		{name: "metadata is the pod's name, namespace, uid and attempt", opts: []SandboxOption{WithAttempt(2)},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				m := c.Metadata
				if m.Name != "web" || m.Namespace != "default" || m.Uid != "u1" || m.Attempt != 2 {
					t.Errorf("metadata %v", m)
				}
			}},
		{name: "kubelet labels win over the pod's labels", check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
			if c.Labels[LabelPodName] != "web" || c.Labels[LabelPodNamespace] != "default" || c.Labels[LabelPodUID] != "u1" || c.Labels["app"] != "web" {
				t.Errorf("labels %v", c.Labels)
			}
		}},
		{name: "annotations are the pod's", check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
			if len(c.Annotations) != 1 || c.Annotations["note"] != "x" {
				t.Errorf("annotations %v", c.Annotations)
			}
		}},
		{name: "hostname is the pod name in a pod network", check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
			if c.Hostname != "web" || c.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_POD {
				t.Errorf("hostname %q ns %v", c.Hostname, c.Linux.SecurityContext.NamespaceOptions)
			}
		}},
		{name: "host network: node namespace and no hostname", mod: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if c.Hostname != "" || c.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_NODE {
					t.Errorf("hostname %q ns %v", c.Hostname, c.Linux.SecurityContext.NamespaceOptions)
				}
			}},
		{name: "forced node network: node namespace and no hostname", opts: []SandboxOption{WithNodeNetwork()},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if c.Hostname != "" || c.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_NODE {
					t.Errorf("hostname %q ns %v", c.Hostname, c.Linux.SecurityContext.NamespaceOptions)
				}
			}},
		{name: "host pid and host ipc use node namespaces", mod: func(p *corev1.Pod) { p.Spec.HostPID, p.Spec.HostIPC = true, true },
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				ns := c.Linux.SecurityContext.NamespaceOptions
				if ns.Pid != runtimeapi.NamespaceMode_NODE || ns.Ipc != runtimeapi.NamespaceMode_NODE {
					t.Errorf("ns %v", ns)
				}
			}},
		{name: "shareProcessNamespace gives a pod pid namespace", mod: func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = &yes },
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if ns := c.Linux.SecurityContext.NamespaceOptions; ns.Pid != runtimeapi.NamespaceMode_POD {
					t.Errorf("ns %v", ns)
				}
			}},
		{name: "default pid namespace is per container, ipc per pod", check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
			if ns := c.Linux.SecurityContext.NamespaceOptions; ns.Pid != runtimeapi.NamespaceMode_CONTAINER || ns.Ipc != runtimeapi.NamespaceMode_POD {
				t.Errorf("ns %v", ns)
			}
		}},
		{name: "log directory is <root>/<namespace>_<name>_<uid>", opts: []SandboxOption{WithPodLogRoot("/var/log/pods")},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if c.LogDirectory != "/var/log/pods/default_web_u1" {
					t.Errorf("log dir %q", c.LogDirectory)
				}
			}},
		{name: "no log root leaves no log directory and no DNS config", check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
			if c.LogDirectory != "" || c.DnsConfig != nil {
				t.Errorf("log dir %q dns %v", c.LogDirectory, c.DnsConfig)
			}
		}},
		{name: "DNS config and cgroup parent as given",
			opts: []SandboxOption{WithDNSConfig(&runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}}), WithCgroupParent("/kubepods/pod1"), nil},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if c.DnsConfig.GetServers()[0] != "10.0.0.10" || c.Linux.CgroupParent != "/kubepods/pod1" {
					t.Errorf("dns %v cgroup %q", c.DnsConfig, c.Linux.CgroupParent)
				}
			}},
		{name: "port mappings come from container ports", check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
			if len(c.PortMappings) != 2 || c.PortMappings[0].HostPort != 8080 || c.PortMappings[1].Protocol != runtimeapi.Protocol_UDP {
				t.Errorf("ports %v", c.PortMappings)
			}
		}},
		{name: "pod security context gives run-as-user, groups and sysctls",
			mod: func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &gid, FSGroup: &fs,
					SupplementalGroups: []int64{4000}, Sysctls: []corev1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}}}
			},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				sc := c.Linux.SecurityContext
				if sc.RunAsUser.GetValue() != 1000 || sc.RunAsGroup.GetValue() != 2000 || len(sc.SupplementalGroups) != 2 ||
					c.Linux.Sysctls["net.core.somaxconn"] != "1024" {
					t.Errorf("sc %v sysctls %v", sc, c.Linux.Sysctls)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			if tc.mod != nil {
				tc.mod(pod)
			}
			cfg, err := SandboxConfig(pod, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg)
		})
	}
}

func TestSandboxConfigDoesNotAliasPodMaps(t *testing.T) {
	pod := testPod()
	cfg, _ := SandboxConfig(pod)
	cfg.Annotations["new"] = "y"
	cfg.Labels["new"] = "y"
	if _, ok := pod.Annotations["new"]; ok {
		t.Error("sandbox annotations alias the pod's")
	}
	if _, ok := pod.Labels["new"]; ok {
		t.Error("sandbox labels alias the pod's")
	}
}
