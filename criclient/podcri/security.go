package podcri

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SecurityContext is c's Linux security context: privileged,
// readOnlyRootFilesystem, runAsUser, runAsGroup, capabilities
// add and drop, allowPrivilegeEscalation (NoNewPrivs is set when it is
// false), seccomp profile, and the pod's supplemental groups; a container
// field overrides the pod's. NamespaceOptions is left for the caller.
// runAsNonRoot has no CRI field: the kubelet checks it against the image's
// user before it creates the container, and so must the caller (see
// RunAsNonRoot).
func SecurityContext(pod *corev1.Pod, c *corev1.Container) *runtimeapi.LinuxContainerSecurityContext {
	out := &runtimeapi.LinuxContainerSecurityContext{}
	var psc *corev1.PodSecurityContext
	if pod != nil {
		psc = pod.Spec.SecurityContext
	}
	var csc *corev1.SecurityContext
	if c != nil {
		csc = c.SecurityContext
	}
	var runAsUser, runAsGroup *int64
	var prof *corev1.SeccompProfile
	if psc != nil {
		runAsUser, runAsGroup, prof = psc.RunAsUser, psc.RunAsGroup, psc.SeccompProfile
		if psc.FSGroup != nil {
			out.SupplementalGroups = append(out.SupplementalGroups, *psc.FSGroup)
		}
		out.SupplementalGroups = append(out.SupplementalGroups, psc.SupplementalGroups...)
	}
	if csc != nil {
		if csc.RunAsUser != nil {
			runAsUser = csc.RunAsUser
		}
		if csc.RunAsGroup != nil {
			runAsGroup = csc.RunAsGroup
		}
		if csc.SeccompProfile != nil {
			prof = csc.SeccompProfile
		}
		if csc.Privileged != nil {
			out.Privileged = *csc.Privileged
		}
		if csc.ReadOnlyRootFilesystem != nil {
			out.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
		}
		if csc.AllowPrivilegeEscalation != nil {
			out.NoNewPrivs = !*csc.AllowPrivilegeEscalation
		}
		if caps := csc.Capabilities; caps != nil {
			out.Capabilities = &runtimeapi.Capability{}
			for _, a := range caps.Add {
				out.Capabilities.AddCapabilities = append(out.Capabilities.AddCapabilities, string(a))
			}
			for _, d := range caps.Drop {
				out.Capabilities.DropCapabilities = append(out.Capabilities.DropCapabilities, string(d))
			}
		}
	}
	if runAsUser != nil {
		out.RunAsUser = &runtimeapi.Int64Value{Value: *runAsUser}
	}
	if runAsGroup != nil {
		out.RunAsGroup = &runtimeapi.Int64Value{Value: *runAsGroup}
	}
	if prof != nil {
		out.Seccomp = seccomp(prof)
	}
	return out
}

// seccomp maps a pod API seccomp profile to the CRI one.
func seccomp(p *corev1.SeccompProfile) *runtimeapi.SecurityProfile {
	switch p.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case corev1.SeccompProfileTypeLocalhost:
		ref := ""
		if p.LocalhostProfile != nil {
			ref = *p.LocalhostProfile
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
	default:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	}
}

// RunAsNonRoot reports whether c must run as a non-root user: its own
// runAsNonRoot, else the pod's.
func RunAsNonRoot(pod *corev1.Pod, c *corev1.Container) bool {
	if c != nil && c.SecurityContext != nil && c.SecurityContext.RunAsNonRoot != nil {
		return *c.SecurityContext.RunAsNonRoot
	}
	if pod != nil && pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsNonRoot != nil {
		return *pod.Spec.SecurityContext.RunAsNonRoot
	}
	return false
}
