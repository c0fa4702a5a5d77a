package podcri_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncpod/syncpod/examples/syncpod/podcri"
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
