package podcri

import (
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Volume is a pod volume as it lives on the host, for the mounts of the
// containers that use it. The caller sets the volume up (makes the
// emptyDir, checks the hostPath, writes the downward-API files); podcri
// only turns volumeMounts into CRI mounts.
type Volume struct {
	// HostPath is the volume's directory (or file) on the host; a mount's
	// subPath is taken under it.
	HostPath string
	// ReadOnly makes every mount of the volume read-only whatever the
	// mount says, as the kubelet mounts the volumes it writes itself
	// (downwardAPI, projected, configMap, secret).
	ReadOnly bool
	// SELinuxRelabel asks the runtime to relabel the volume for the
	// container, when the host runs SELinux (WithSELinux): the kubelet
	// does so for the volumes it manages (emptyDir, downwardAPI,
	// projected, configMap, secret), never for a hostPath.
	SELinuxRelabel bool
}

// VolumeAt is v at hostPath with the attributes the kubelet gives its
// kind: read-only and relabelled for downwardAPI, projected, configMap and
// secret volumes; relabelled for emptyDir; neither for hostPath and the
// rest.
func VolumeAt(v corev1.VolumeSource, hostPath string) Volume {
	out := Volume{HostPath: hostPath}
	switch {
	case v.EmptyDir != nil:
		out.SELinuxRelabel = true
	case v.DownwardAPI != nil, v.Projected != nil, v.ConfigMap != nil, v.Secret != nil:
		out.ReadOnly, out.SELinuxRelabel = true, true
	}
	return out
}

// Mounts is c's volumeMounts as CRI mounts, in order, given where each
// pod volume lives (by volume name), as the kubelet makes them:
//
//   - a mount naming a volume that volumes lacks is a *MountError (the
//     kubelet's "cannot find volume");
//   - Readonly is the mount's readOnly, or the volume's ReadOnly;
//   - subPath: an absolute path, or one with a ".." element anywhere
//     (even one that would stay inside), is a *MountError, as in the
//     kubelet; otherwise the host path is the volume's path joined with
//     it. Creating a missing subPath directory, and checking that it does
//     not resolve outside the volume through a symlink, is the caller's
//     (podcri touches no file);
//   - mountPropagation: unset or None is PRIVATE, HostToContainer is
//     HOST_TO_CONTAINER, Bidirectional is BIDIRECTIONAL in a privileged
//     container and a *MountError in any other (API validation refuses
//     it), anything else a *MountError ("invalid MountPropagation mode");
//   - SelinuxRelabel is set when selinux is true and the volume asks for
//     it, on the first mount of that volume in c only (the kubelet
//     relabels a volume once);
//   - subPathExpr and volumeDevices are *MountErrors: not supported.
func Mounts(c *corev1.Container, volumes map[string]Volume, selinux bool) ([]*runtimeapi.Mount, error) {
	if c == nil {
		return nil, &ArgError{Method: "Mounts", Arg: "container", Reason: "must not be nil"}
	}
	if len(c.VolumeDevices) > 0 {
		d := c.VolumeDevices[0]
		return nil, &MountError{Container: c.Name, Volume: d.Name, Reason: "volumeDevices (raw block volumes) are not supported"}
	}
	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	relabelled := map[string]bool{}
	out := make([]*runtimeapi.Mount, 0, len(c.VolumeMounts))
	for _, m := range c.VolumeMounts {
		bad := func(format string, args ...any) error {
			return &MountError{Container: c.Name, Volume: m.Name, Reason: fmt.Sprintf(format, args...)}
		}
		v, ok := volumes[m.Name]
		if !ok || v.HostPath == "" {
			return nil, bad("cannot find volume %q to mount into container %q", m.Name, c.Name)
		}
		if m.SubPathExpr != "" {
			return nil, bad("subPathExpr is not supported")
		}
		hostPath := v.HostPath
		if m.SubPath != "" {
			if err := CheckSubPath(m.SubPath); err != nil {
				return nil, bad("%v", err)
			}
			hostPath = filepath.Join(hostPath, m.SubPath)
		}
		if !filepath.IsAbs(m.MountPath) {
			return nil, bad("mountPath %q must be an absolute path", m.MountPath)
		}
		prop, err := propagation(m.MountPropagation, privileged)
		if err != nil {
			return nil, bad("%v", err)
		}
		relabel := selinux && v.SELinuxRelabel && !relabelled[m.Name]
		if relabel {
			relabelled[m.Name] = true
		}
		out = append(out, &runtimeapi.Mount{
			ContainerPath:  m.MountPath,
			HostPath:       hostPath,
			Readonly:       m.ReadOnly || v.ReadOnly,
			SelinuxRelabel: relabel,
			Propagation:    prop,
		})
	}
	return out, nil
}

// CheckSubPath checks a volumeMount's subPath as the kubelet does before
// it joins it to the volume's path: it must not be absolute, and no
// element of it may be "..".
func CheckSubPath(p string) error {
	if filepath.IsAbs(p) {
		return fmt.Errorf("error SubPath `%s` must not be an absolute path", p)
	}
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return fmt.Errorf("unable to provision SubPath `%s`: must not contain '..'", p)
		}
	}
	return nil
}

func propagation(mode *corev1.MountPropagationMode, privileged bool) (runtimeapi.MountPropagation, error) {
	if mode == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	}
	switch *mode {
	case corev1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case corev1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case corev1.MountPropagationBidirectional:
		if !privileged {
			return 0, fmt.Errorf("mount propagation Bidirectional is available only to privileged containers")
		}
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	}
	return 0, fmt.Errorf("invalid MountPropagation mode: %q", *mode)
}
