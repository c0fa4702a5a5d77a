package podcri

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestSecurityContext(t *testing.T) {
	u := func(v int64) *int64 { return &v }
	b := func(v bool) *bool { return &v }
	prof := "profiles/audit.json"
	cases := []struct {
		name  string
		psc   *corev1.PodSecurityContext
		csc   *corev1.SecurityContext
		check func(*testing.T, *runtimeapi.LinuxContainerSecurityContext)
	}{
		{name: "pod run-as-user and group apply to the container", psc: &corev1.PodSecurityContext{RunAsUser: u(1000), RunAsGroup: u(1000)},
			check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
				if s.RunAsUser.GetValue() != 1000 || s.RunAsGroup.GetValue() != 1000 {
					t.Errorf("sc %v", s)
				}
			}},
		{name: "container run-as-user overrides the pod's", psc: &corev1.PodSecurityContext{RunAsUser: u(1000)}, csc: &corev1.SecurityContext{RunAsUser: u(0)},
			check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
				if s.RunAsUser == nil || s.RunAsUser.Value != 0 {
					t.Errorf("sc %v", s)
				}
			}},
		{name: "privileged and read-only root filesystem", csc: &corev1.SecurityContext{Privileged: b(true), ReadOnlyRootFilesystem: b(true)},
			check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
				if !s.Privileged || !s.ReadonlyRootfs {
					t.Errorf("sc %v", s)
				}
			}},
		{name: "allowPrivilegeEscalation false sets no_new_privs", csc: &corev1.SecurityContext{AllowPrivilegeEscalation: b(false)},
			check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
				if !s.NoNewPrivs {
					t.Errorf("sc %v", s)
				}
			}},
		{name: "capabilities add and drop", csc: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}}},
			check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
				c := s.Capabilities
				if len(c.AddCapabilities) != 1 || c.AddCapabilities[0] != "NET_ADMIN" || c.DropCapabilities[0] != "ALL" {
					t.Errorf("caps %v", c)
				}
			}},
		{name: "container seccomp profile overrides the pod's",
			psc: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			csc: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &prof}},
			check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
				if s.Seccomp.ProfileType != runtimeapi.SecurityProfile_Localhost || s.Seccomp.LocalhostRef != prof {
					t.Errorf("seccomp %v", s.Seccomp)
				}
			}},
		{name: "pod seccomp runtime default", psc: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
				if s.Seccomp.ProfileType != runtimeapi.SecurityProfile_RuntimeDefault {
					t.Errorf("seccomp %v", s.Seccomp)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.SecurityContext = tc.psc
			pod.Spec.Containers[0].SecurityContext = tc.csc
			cfg, err := ContainerConfig(pod, &pod.Spec.Containers[0])
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg.Linux.SecurityContext)
		})
	}
}

func TestRunAsNonRoot(t *testing.T) {
	yes, no := true, false
	pod := testPod()
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &yes}
	if !RunAsNonRoot(pod, &pod.Spec.Containers[0]) {
		t.Error("pod runAsNonRoot ignored")
	}
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: &no}
	if RunAsNonRoot(pod, &pod.Spec.Containers[0]) {
		t.Error("container runAsNonRoot does not override the pod's")
	}
	if RunAsNonRoot(nil, nil) {
		t.Error("nil pod must not run as non-root")
	}
}
