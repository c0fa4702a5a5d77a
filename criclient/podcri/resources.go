package podcri

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's CPU constants (kuberuntime's helpers: 1 CPU = 1024
// shares, at least 2 shares, a 100ms CFS period, a quota of at least 1ms)
// and OOM score adjustments (qos policy: Guaranteed -997, BestEffort 1000).
const (
	// MinShares is the least CpuShares the kubelet gives a container.
	MinShares = 2
	// SharesPerCPU is the CpuShares of one whole CPU.
	SharesPerCPU = 1024
	// QuotaPeriod is the CFS period, in microseconds, the kubelet sets.
	QuotaPeriod = 100000
	// MinQuotaPeriod is the least CFS quota, in microseconds, the kubelet sets.
	MinQuotaPeriod = 1000

	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
)

// Resources is c's Linux resources as the kubelet computes them:
//   - CpuShares = milliCPU(request)*1024/1000, at least 2; with a limit
//     and no request, the request is the limit (the API server's
//     defaulting, applied here for pods that never went through it).
//   - CpuPeriod 100000 and CpuQuota = milliCPU(limit)*100000/1000, at
//     least 1000, only when there is a CPU limit.
//   - MemoryLimitInBytes from the memory limit (0 = none).
//   - OomScoreAdj by the pod's QoS class: Guaranteed -997, BestEffort 1000,
//     Burstable 1000 - 1000*memoryRequest/nodeMemory clamped to [3, 999]
//     (the kubelet's floor is 1000 + the Guaranteed -997).
func Resources(pod *corev1.Pod, c *corev1.Container, nodeMemory int64) *runtimeapi.LinuxContainerResources {
	if c == nil {
		return &runtimeapi.LinuxContainerResources{CpuShares: MinShares}
	}
	lim, req := c.Resources.Limits, c.Resources.Requests
	out := &runtimeapi.LinuxContainerResources{}
	cpuReq, hasReq := req[corev1.ResourceCPU]
	cpuLim, hasLim := lim[corev1.ResourceCPU]
	if !hasReq && hasLim {
		cpuReq, hasReq = cpuLim, true
	}
	var milliReq int64
	if hasReq {
		milliReq = cpuReq.MilliValue()
	}
	out.CpuShares = milliCPUToShares(milliReq)
	if hasLim {
		out.CpuPeriod = QuotaPeriod
		out.CpuQuota = milliCPUToQuota(cpuLim.MilliValue())
	}
	if m, ok := lim[corev1.ResourceMemory]; ok {
		out.MemoryLimitInBytes = m.Value()
	}
	out.OomScoreAdj = oomScoreAdj(pod, c, nodeMemory)
	return out
}

func milliCPUToShares(milli int64) int64 {
	shares := milli * SharesPerCPU / 1000
	if shares < MinShares {
		return MinShares
	}
	return shares
}

func milliCPUToQuota(milli int64) int64 {
	quota := milli * QuotaPeriod / 1000
	if quota < MinQuotaPeriod {
		return MinQuotaPeriod
	}
	return quota
}

func oomScoreAdj(pod *corev1.Pod, c *corev1.Container, nodeMemory int64) int64 {
	switch QOSClass(pod) {
	case corev1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case corev1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	if nodeMemory <= 0 {
		nodeMemory = DefaultNodeMemoryCapacity
	}
	memReq := c.Resources.Requests.Memory().Value()
	if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
		memReq = c.Resources.Limits.Memory().Value()
	}
	adj := 1000 - (1000*memReq)/nodeMemory
	// The kubelet keeps a Burstable container above a Guaranteed one that
	// uses all memory (floor 1000 + guaranteedOOMScoreAdj = 3) and below a
	// BestEffort one (999 instead of 1000).
	if adj < 1000+guaranteedOOMScoreAdj {
		return 1000 + guaranteedOOMScoreAdj
	}
	if adj >= besteffortOOMScoreAdj {
		return besteffortOOMScoreAdj - 1
	}
	return adj
}

// QOSClass is pod's QoS class, from pod.Status.QOSClass when set, else
// computed from its containers' requests and limits as the API server does:
// BestEffort when none sets CPU or memory, Guaranteed when every container
// sets CPU and memory limits equal to its requests (a missing request
// defaults to the limit), Burstable otherwise.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	if pod == nil {
		return corev1.PodQOSBestEffort
	}
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	set, guaranteed := false, true
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				l, hasL := c.Resources.Limits[r]
				q, hasQ := c.Resources.Requests[r]
				if hasL || hasQ {
					set = true
				}
				if !hasL || (hasQ && q.Cmp(l) != 0) {
					guaranteed = false
				}
			}
		}
	}
	switch {
	case !set:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	default:
		return corev1.PodQOSBurstable
	}
}
