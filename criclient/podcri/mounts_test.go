package podcri

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMounts(t *testing.T) {
	prop := func(m corev1.MountPropagationMode) *corev1.MountPropagationMode { return &m }
	yes := true
	vols := map[string]Volume{
		"data":  {HostPath: "/pods/u1/volumes/kubernetes.io~empty-dir/data", SELinuxRelabel: true},
		"host":  {HostPath: "/srv/host"},
		"info":  {HostPath: "/pods/u1/volumes/kubernetes.io~downward-api/info", ReadOnly: true, SELinuxRelabel: true},
		"empty": {},
	}
	cases := []struct {
		name       string // the kubelet behaviour the case follows
		mounts     []corev1.VolumeMount
		privileged bool
		selinux    bool
		want       []*runtimeapi.Mount
		errHas     string // a *MountError whose message holds this
	}{
		{name: "a mount is the volume's host path at the mount path, private by default",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			want:   []*runtimeapi.Mount{{HostPath: vols["data"].HostPath, ContainerPath: "/data"}}},
		{name: "readOnly of the mount is kept",
			mounts: []corev1.VolumeMount{{Name: "host", MountPath: "/h", ReadOnly: true}},
			want:   []*runtimeapi.Mount{{HostPath: "/srv/host", ContainerPath: "/h", Readonly: true}}},
		{name: "a volume the kubelet writes (downwardAPI) is mounted read-only even when the mount is not",
			mounts: []corev1.VolumeMount{{Name: "info", MountPath: "/etc/info"}},
			want:   []*runtimeapi.Mount{{HostPath: vols["info"].HostPath, ContainerPath: "/etc/info", Readonly: true}}},
		{name: "subPath is joined to the volume's path",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/cache", SubPath: "a/b"}},
			want:   []*runtimeapi.Mount{{HostPath: vols["data"].HostPath + "/a/b", ContainerPath: "/cache"}}},
		{name: "an absolute subPath is refused",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "/etc"}}, errHas: "must not be an absolute path"},
		{name: "a subPath escaping with .. is refused",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "../../etc"}}, errHas: "must not contain '..'"},
		{name: "a .. element is refused even when it would stay inside the volume",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "a/../b"}}, errHas: "must not contain '..'"},
		{name: "a name that merely starts with .. is a plain name",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "..a"}},
			want:   []*runtimeapi.Mount{{HostPath: vols["data"].HostPath + "/..a", ContainerPath: "/x"}}},
		{name: "propagation None is PRIVATE",
			mounts: []corev1.VolumeMount{{Name: "host", MountPath: "/h", MountPropagation: prop(corev1.MountPropagationNone)}},
			want:   []*runtimeapi.Mount{{HostPath: "/srv/host", ContainerPath: "/h", Propagation: runtimeapi.MountPropagation_PROPAGATION_PRIVATE}}},
		{name: "propagation HostToContainer is HOST_TO_CONTAINER",
			mounts: []corev1.VolumeMount{{Name: "host", MountPath: "/h", MountPropagation: prop(corev1.MountPropagationHostToContainer)}},
			want:   []*runtimeapi.Mount{{HostPath: "/srv/host", ContainerPath: "/h", Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}}},
		{name: "propagation Bidirectional is BIDIRECTIONAL in a privileged container",
			mounts:     []corev1.VolumeMount{{Name: "host", MountPath: "/h", MountPropagation: prop(corev1.MountPropagationBidirectional)}},
			privileged: true,
			want:       []*runtimeapi.Mount{{HostPath: "/srv/host", ContainerPath: "/h", Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL}}},
		{name: "propagation Bidirectional is refused in an unprivileged container (API validation)",
			mounts: []corev1.VolumeMount{{Name: "host", MountPath: "/h", MountPropagation: prop(corev1.MountPropagationBidirectional)}},
			errHas: "only to privileged containers"},
		{name: "an unknown propagation mode is refused",
			mounts: []corev1.VolumeMount{{Name: "host", MountPath: "/h", MountPropagation: prop("Sideways")}},
			errHas: `invalid MountPropagation mode: "Sideways"`},
		{name: "a mount of a volume the pod does not have is refused (cannot find volume)",
			mounts: []corev1.VolumeMount{{Name: "ghost", MountPath: "/g"}}, errHas: `cannot find volume "ghost" to mount into container "app"`},
		{name: "a volume without a host path cannot be found either",
			mounts: []corev1.VolumeMount{{Name: "empty", MountPath: "/e"}}, errHas: "cannot find volume"},
		{name: "a relative mount path is refused",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "data"}}, errHas: "must be an absolute path"},
		{name: "subPathExpr is not supported",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/x", SubPathExpr: "$(POD)"}}, errHas: "subPathExpr is not supported"},
		{name: "with SELinux a managed volume is relabelled on its first mount only; a hostPath never",
			selinux: true,
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/a"}, {Name: "data", MountPath: "/b", SubPath: "b"},
				{Name: "host", MountPath: "/h"}},
			want: []*runtimeapi.Mount{{HostPath: vols["data"].HostPath, ContainerPath: "/a", SelinuxRelabel: true},
				{HostPath: vols["data"].HostPath + "/b", ContainerPath: "/b"}, {HostPath: "/srv/host", ContainerPath: "/h"}}},
		{name: "without SELinux nothing is relabelled",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/a"}},
			want:   []*runtimeapi.Mount{{HostPath: vols["data"].HostPath, ContainerPath: "/a"}}},
		{name: "mounts keep the container's order",
			mounts: []corev1.VolumeMount{{Name: "host", MountPath: "/h"}, {Name: "data", MountPath: "/d"}},
			want:   []*runtimeapi.Mount{{HostPath: "/srv/host", ContainerPath: "/h"}, {HostPath: vols["data"].HostPath, ContainerPath: "/d"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{Name: "app", VolumeMounts: tc.mounts}
			if tc.privileged {
				c.SecurityContext = &corev1.SecurityContext{Privileged: &yes}
			}
			got, err := Mounts(c, vols, tc.selinux)
			if tc.errHas != "" {
				var me *MountError
				if !errors.As(err, &me) || me.Container != "app" || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err %v, want a *MountError containing %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("mounts %v, want %v", got, tc.want)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.HostPath != w.HostPath || g.ContainerPath != w.ContainerPath || g.Readonly != w.Readonly ||
					g.SelinuxRelabel != w.SelinuxRelabel || g.Propagation != w.Propagation {
					t.Errorf("mount %d = %v, want %v", i, g, w)
				}
			}
		})
	}
}

func TestVolumeAt(t *testing.T) {
	for _, tc := range []struct {
		name              string
		src               corev1.VolumeSource
		readOnly, relabel bool
	}{
		{"emptyDir: managed, relabelled, writable", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, false, true},
		{"hostPath: not managed, never relabelled", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}, false, false},
		{"downwardAPI: written by the kubelet, read-only", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}, true, true},
		{"projected: read-only", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}, true, true},
		{"configMap: read-only", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}, true, true},
		{"secret: read-only", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}, true, true},
	} {
		v := VolumeAt(tc.src, "/p")
		if v.HostPath != "/p" || v.ReadOnly != tc.readOnly || v.SELinuxRelabel != tc.relabel {
			t.Errorf("%s: %+v", tc.name, v)
		}
	}
}

func TestContainerConfigVolumes(t *testing.T) {
	pod := testPod()
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	vols := map[string]Volume{"data": {HostPath: "/v/data", SELinuxRelabel: true}}
	// Volume mounts, then WithMounts, then the termination-message file,
	// which the kubelet relabels whenever SELinux is on.
	cfg, err := ContainerConfig(pod, c, WithVolumes(vols), WithSELinux(true),
		WithMounts(&runtimeapi.Mount{HostPath: "/extra", ContainerPath: "/extra"}), WithTerminationMessageHostPath("/t/0"))
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Mounts
	if len(m) != 3 || m[0].HostPath != "/v/data" || !m[0].SelinuxRelabel || m[1].HostPath != "/extra" ||
		m[2].HostPath != "/t/0" || m[2].ContainerPath != "/dev/termination-log" || !m[2].SelinuxRelabel {
		t.Errorf("mounts %v", m)
	}
	// Without WithVolumes the volumeMounts are the caller's business.
	cfg, err = ContainerConfig(pod, c)
	if err != nil || len(cfg.Mounts) != 0 {
		t.Errorf("without WithVolumes: mounts %v, err %v", cfg.GetMounts(), err)
	}
	// With it, an unknown volume fails the config.
	var me *MountError
	if _, err := ContainerConfig(pod, c, WithVolumes(nil)); !errors.As(err, &me) || me.Volume != "data" {
		t.Errorf("unknown volume: %v", err)
	}
	c.VolumeDevices = []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}
	if _, err := ContainerConfig(pod, c, WithVolumes(vols)); !errors.As(err, &me) || me.Volume != "blk" {
		t.Errorf("volume device: %v", err)
	}
}
