package podcri

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestResources(t *testing.T) {
	const gi = int64(1) << 30
	cases := []struct {
		name               string
		req, lim           corev1.ResourceList
		nodeMem            int64
		shares, quota, mem int64
		period             int64
		oom                int64
	}{
		{name: "cpu request 100m gives 102 shares", req: rl("cpu", "100m"), shares: 102, oom: 999},
		{name: "no cpu request gives the minimum 2 shares", shares: 2, oom: 1000},
		{name: "cpu request 1m gives the minimum 2 shares", req: rl("cpu", "1m"), shares: 2, oom: 999},
		{name: "limit only: request defaults to limit", lim: rl("cpu", "500m"), shares: 512, period: 100000, quota: 50000, oom: 999},
		{name: "cpu limit 2 gives quota 200000 per 100000 period", req: rl("cpu", "1"), lim: rl("cpu", "2"), shares: 1024, period: 100000, quota: 200000, oom: 999},
		{name: "cpu limit 5m gives the minimum quota 1000", req: rl("cpu", "5m"), lim: rl("cpu", "5m"), shares: 5, period: 100000, quota: 1000, oom: 999},
		{name: "no cpu limit sets no quota", req: rl("cpu", "250m"), shares: 256, oom: 999},
		{name: "memory limit sets MemoryLimitInBytes", req: rl("memory", "1Gi"), lim: rl("memory", "2Gi"), shares: 2, mem: 2 * gi, oom: 875},
		{name: "guaranteed oom score adj is -997", req: rl("cpu", "1", "memory", "1Gi"), lim: rl("cpu", "1", "memory", "1Gi"), shares: 1024, period: 100000, quota: 100000, mem: gi, oom: -997},
		{name: "besteffort oom score adj is 1000", shares: 2, oom: 1000},
		{name: "burstable oom score adj is 1000 - 1000*request/capacity", req: rl("memory", "1Gi"), nodeMem: 4 * gi, shares: 2, oom: 750},
		{name: "burstable oom score adj clamps to 3", req: rl("memory", "8Gi"), nodeMem: 8 * gi, shares: 2, oom: 3},
		{name: "burstable oom score adj stays below besteffort at 999", req: rl("memory", "1"), shares: 2, oom: 999},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := corev1.Container{Name: "app", Resources: corev1.ResourceRequirements{Requests: tc.req, Limits: tc.lim}}
			pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
			got := Resources(pod, &pod.Spec.Containers[0], tc.nodeMem)
			if got.CpuShares != tc.shares || got.CpuQuota != tc.quota || got.CpuPeriod != tc.period ||
				got.MemoryLimitInBytes != tc.mem || got.OomScoreAdj != tc.oom {
				t.Errorf("got shares %d quota %d period %d mem %d oom %d, want %d %d %d %d %d",
					got.CpuShares, got.CpuQuota, got.CpuPeriod, got.MemoryLimitInBytes, got.OomScoreAdj,
					tc.shares, tc.quota, tc.period, tc.mem, tc.oom)
			}
		})
	}
}

func TestQOSClass(t *testing.T) {
	cases := []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"status qos class wins", &corev1.Pod{Status: corev1.PodStatus{QOSClass: corev1.PodQOSGuaranteed}}, corev1.PodQOSGuaranteed},
		{"no requests or limits is besteffort", &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}, corev1.PodQOSBestEffort},
		{"limits only equal requests by default: guaranteed", &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a",
			Resources: corev1.ResourceRequirements{Limits: rl("cpu", "1", "memory", "1Gi")}}}}}, corev1.PodQOSGuaranteed},
		{"a request below its limit is burstable", &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a",
			Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1"), Limits: rl("cpu", "2", "memory", "1Gi")}}}}}, corev1.PodQOSBurstable},
		{"nil pod is besteffort", nil, corev1.PodQOSBestEffort},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := QOSClass(tc.pod); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
