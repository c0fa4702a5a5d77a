package podcri_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
)

func Example() {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "1234"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "nginx:1.27",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			},
		}}},
	}
	sb, err := podcri.SandboxConfig(pod, podcri.WithPodLogRoot("/var/log/pods"))
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := podcri.ContainerConfig(pod, &pod.Spec.Containers[0], podcri.WithRestartCount(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("log directory:", sb.LogDirectory)
	fmt.Println("log path:", c.LogPath)
	r := c.Linux.Resources
	fmt.Println("shares:", r.CpuShares, "quota:", r.CpuQuota, "period:", r.CpuPeriod, "oom:", r.OomScoreAdj)
	// Output:
	// log directory: /var/log/pods/default_web_1234
	// log path: app/1.log
	// shares: 256 quota: 50000 period: 100000 oom: 999
}

// A container's volumeMounts become CRI mounts once the caller says where
// each pod volume lives on the host; a downwardAPI volume's files come
// from VolumeFiles.
func ExampleMounts() {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "1234", Labels: map[string]string{"app": "web", "tier": "front"}},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
			},
			Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27", VolumeMounts: []corev1.VolumeMount{
				{Name: "cache", MountPath: "/var/cache/nginx", SubPath: "nginx"},
				{Name: "info", MountPath: "/etc/podinfo"},
			}}},
		},
	}
	dir := "/var/lib/syncpod/pods/1234/volumes"
	volumes := map[string]podcri.Volume{
		"cache": podcri.VolumeAt(pod.Spec.Volumes[0].VolumeSource, dir+"/kubernetes.io~empty-dir/cache"),
		"info":  podcri.VolumeAt(pod.Spec.Volumes[1].VolumeSource, dir+"/kubernetes.io~downward-api/info"),
	}
	c, err := podcri.ContainerConfig(pod, &pod.Spec.Containers[0], podcri.WithVolumes(volumes))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range c.Mounts {
		fmt.Println(m.ContainerPath, "<-", m.HostPath, "readonly:", m.Readonly)
	}
	files, err := podcri.VolumeFiles(pod, &pod.Spec.Volumes[1])
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s (%o):\n%s\n", files[0].Path, files[0].Mode, files[0].Data)
	// Output:
	// /var/cache/nginx <- /var/lib/syncpod/pods/1234/volumes/kubernetes.io~empty-dir/cache/nginx readonly: false
	// /etc/podinfo <- /var/lib/syncpod/pods/1234/volumes/kubernetes.io~downward-api/info readonly: true
	// labels (644):
	// app="web"
	// tier="front"
}
