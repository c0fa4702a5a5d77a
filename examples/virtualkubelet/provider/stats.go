package provider

import (
	"context"
	"fmt"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// labelPodUID is the kubelet's label of a sandbox's or container's pod UID.
const labelPodUID = "io.kubernetes.pod.uid"

// GetStatsSummary is the kubelet's /stats/summary for the provider's
// pods, from the runtime's CRI stats (what the kubelet reads with its
// PodAndContainerStatsFromCRI gate): each pod's CPU and memory from
// ListPodSandboxStats (the sum of its containers' where the runtime has
// none or fails them), each container's from ListContainerStats; and the
// node's CPU and memory from the host's /proc (omitted where /proc cannot
// be read). UsageNanoCores is the runtime's (it needs two of its samples;
// the node's is the rate since the previous call). Network, filesystem and
// volume stats are not reported. A runtime without CRI stats
// (Unimplemented, as crisim) gives the pods without CPU and memory.
func (p *Provider) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	if ctx == nil {
		return nil, errdefs.InvalidInput("GetStatsSummary: ctx must not be nil")
	}
	if err := p.open(); err != nil {
		return nil, err
	}
	now := p.cfg.clock.Now()
	pods, err := p.GetPods(ctx)
	if err != nil {
		return nil, err
	}
	containers, err := p.rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if status.Code(err) == codes.Unimplemented { // crisim: the pods without stats
		containers, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("GetStatsSummary: ListContainerStats: %w", err)
	}
	// A runtime may fail every sandbox's stats for one it cannot measure
	// (containerd, for a sandbox without a cgroup parent, as the agent's
	// are): the pods' stats are then their containers' sums.
	sandboxes, err := p.rt.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("GetStatsSummary: ListPodSandboxStats: %w", err)
	}
	if err != nil && status.Code(err) != codes.Unimplemented {
		p.cfg.logger.Debug("no sandbox stats: pods get their containers' sums", zap.Error(err))
	}
	byPod := map[types.UID][]*runtimeapi.ContainerStats{}
	for _, c := range containers {
		uid := types.UID(c.GetAttributes().GetLabels()[labelPodUID])
		byPod[uid] = append(byPod[uid], c)
	}
	sandboxOf := map[types.UID]*runtimeapi.PodSandboxStats{}
	for _, s := range sandboxes {
		uid := types.UID(s.GetAttributes().GetMetadata().GetUid())
		if uid == "" {
			uid = types.UID(s.GetAttributes().GetLabels()[labelPodUID])
		}
		if old := sandboxOf[uid]; old == nil || s.GetLinux().GetCpu().GetTimestamp() > old.GetLinux().GetCpu().GetTimestamp() {
			sandboxOf[uid] = s
		}
	}

	sum := &statsv1alpha1.Summary{Node: p.nodeStats(now)}
	for _, pod := range pods {
		sum.Pods = append(sum.Pods, podStats(pod, byPod[pod.UID], sandboxOf[pod.UID], now))
	}
	return sum, nil
}

// podStats is one pod's summary: its running containers' stats (the
// newest instance of each) and its sandbox's.
func podStats(pod *corev1.Pod, containers []*runtimeapi.ContainerStats, sandbox *runtimeapi.PodSandboxStats, now time.Time) statsv1alpha1.PodStats {
	ps := statsv1alpha1.PodStats{PodRef: statsv1alpha1.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}}
	if pod.Status.StartTime != nil {
		ps.StartTime = *pod.Status.StartTime
	}
	running := map[string]corev1.ContainerStatus{} // container ID -> status, running ones
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running != nil {
				running[bareID(cs.ContainerID)] = cs
			}
		}
	}
	var cpuSum, memSum uint64
	var haveCPU, haveMem bool
	for _, c := range containers {
		cs, ok := running[c.GetAttributes().GetId()]
		if !ok {
			continue
		}
		st := statsv1alpha1.ContainerStats{Name: cs.Name, StartTime: cs.State.Running.StartedAt,
			CPU: cpuStats(c.GetCpu(), now), Memory: memoryStats(c.GetMemory(), now)}
		if st.CPU != nil && st.CPU.UsageCoreNanoSeconds != nil {
			cpuSum += *st.CPU.UsageCoreNanoSeconds
			haveCPU = true
		}
		if st.Memory != nil && st.Memory.WorkingSetBytes != nil {
			memSum += *st.Memory.WorkingSetBytes
			haveMem = true
		}
		ps.Containers = append(ps.Containers, st)
	}
	sort.Slice(ps.Containers, func(i, j int) bool { return ps.Containers[i].Name < ps.Containers[j].Name })
	if lx := sandbox.GetLinux(); lx != nil && (lx.GetCpu() != nil || lx.GetMemory() != nil) {
		ps.CPU, ps.Memory = cpuStats(lx.GetCpu(), now), memoryStats(lx.GetMemory(), now)
	} else {
		t := metav1.NewTime(now)
		if haveCPU {
			ps.CPU = &statsv1alpha1.CPUStats{Time: t, UsageCoreNanoSeconds: &cpuSum}
		}
		if haveMem {
			ps.Memory = &statsv1alpha1.MemoryStats{Time: t, WorkingSetBytes: &memSum}
		}
	}
	return ps
}

func cpuStats(c *runtimeapi.CpuUsage, now time.Time) *statsv1alpha1.CPUStats {
	if c == nil {
		return nil
	}
	s := &statsv1alpha1.CPUStats{Time: statTime(c.GetTimestamp(), now)}
	if v := c.GetUsageCoreNanoSeconds(); v != nil {
		s.UsageCoreNanoSeconds = ptr(v.GetValue())
	}
	if v := c.GetUsageNanoCores(); v != nil {
		s.UsageNanoCores = ptr(v.GetValue())
	}
	return s
}

func memoryStats(m *runtimeapi.MemoryUsage, now time.Time) *statsv1alpha1.MemoryStats {
	if m == nil {
		return nil
	}
	s := &statsv1alpha1.MemoryStats{Time: statTime(m.GetTimestamp(), now)}
	for dst, src := range map[**uint64]*runtimeapi.UInt64Value{
		&s.WorkingSetBytes: m.GetWorkingSetBytes(), &s.AvailableBytes: m.GetAvailableBytes(),
		&s.UsageBytes: m.GetUsageBytes(), &s.RSSBytes: m.GetRssBytes(),
		&s.PageFaults: m.GetPageFaults(), &s.MajorPageFaults: m.GetMajorPageFaults(),
	} {
		if src != nil {
			*dst = ptr(src.GetValue())
		}
	}
	return s
}

// statTime is a CRI timestamp (nanoseconds), or now when it has none.
func statTime(ns int64, now time.Time) metav1.Time {
	if ns <= 0 {
		return metav1.NewTime(now)
	}
	return metav1.NewTime(time.Unix(0, ns))
}

func ptr(v uint64) *uint64 { return &v }

// GetMetricsResource is the kubelet's resource-metrics endpoint
// (/metrics/resource, what metrics-server scrapes): the node's, pods' and
// containers' CPU time and memory working set, and the containers' start
// times, under the kubelet's metric names and labels, from
// GetStatsSummary. resource_scrape_error is 1 when the stats could not be
// read (and nothing else is reported), 0 otherwise.
func (p *Provider) GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	sum, err := p.GetStatsSummary(ctx)
	if err != nil {
		if ctx == nil {
			return nil, err
		}
		return []*dto.MetricFamily{gaugeFamily("resource_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise",
			sample(1, nil, time.Time{}))}, nil
	}
	return resourceMetrics(sum), nil
}

// resourceMetrics are the resource metrics of sum.
func resourceMetrics(sum *statsv1alpha1.Summary) []*dto.MetricFamily {
	nodeCPU := counterFamily("node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds")
	nodeMem := gaugeFamily("node_memory_working_set_bytes", "Current working set of the node in bytes")
	podCPU := counterFamily("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds")
	podMem := gaugeFamily("pod_memory_working_set_bytes", "Current working set of the pod in bytes")
	ctrCPU := counterFamily("container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds")
	ctrMem := gaugeFamily("container_memory_working_set_bytes", "Current working set of the container in bytes")
	ctrStart := gaugeFamily("container_start_time_seconds", "Start time of the container since unix epoch in seconds")
	addCPU := func(f *dto.MetricFamily, c *statsv1alpha1.CPUStats, labels []*dto.LabelPair) {
		if c != nil && c.UsageCoreNanoSeconds != nil {
			f.Metric = append(f.Metric, counterSample(float64(*c.UsageCoreNanoSeconds)/1e9, labels, c.Time.Time))
		}
	}
	addMem := func(f *dto.MetricFamily, m *statsv1alpha1.MemoryStats, labels []*dto.LabelPair) {
		if m != nil && m.WorkingSetBytes != nil {
			f.Metric = append(f.Metric, sample(float64(*m.WorkingSetBytes), labels, m.Time.Time))
		}
	}
	addCPU(nodeCPU, sum.Node.CPU, nil)
	addMem(nodeMem, sum.Node.Memory, nil)
	for _, ps := range sum.Pods {
		pl := labelPairs("namespace", ps.PodRef.Namespace, "pod", ps.PodRef.Name)
		addCPU(podCPU, ps.CPU, pl)
		addMem(podMem, ps.Memory, pl)
		for _, cs := range ps.Containers {
			cl := labelPairs("container", cs.Name, "namespace", ps.PodRef.Namespace, "pod", ps.PodRef.Name)
			addCPU(ctrCPU, cs.CPU, cl)
			addMem(ctrMem, cs.Memory, cl)
			if !cs.StartTime.IsZero() {
				ctrStart.Metric = append(ctrStart.Metric, sample(float64(cs.StartTime.UnixNano())/1e9, cl, cs.StartTime.Time))
			}
		}
	}
	out := []*dto.MetricFamily{}
	for _, f := range []*dto.MetricFamily{ctrCPU, ctrMem, ctrStart, nodeCPU, nodeMem, podCPU, podMem} {
		if len(f.Metric) > 0 { // the text format has no empty family
			out = append(out, f)
		}
	}
	return append(out, gaugeFamily("resource_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", sample(0, nil, time.Time{})))
}

func labelPairs(kv ...string) []*dto.LabelPair {
	var out []*dto.LabelPair
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &dto.LabelPair{Name: &kv[i], Value: &kv[i+1]})
	}
	return out
}

func counterFamily(name, help string) *dto.MetricFamily {
	t := dto.MetricType_COUNTER
	return &dto.MetricFamily{Name: &name, Help: &help, Type: &t}
}

func gaugeFamily(name, help string, samples ...*dto.Metric) *dto.MetricFamily {
	t := dto.MetricType_GAUGE
	return &dto.MetricFamily{Name: &name, Help: &help, Type: &t, Metric: samples}
}

func counterSample(v float64, labels []*dto.LabelPair, at time.Time) *dto.Metric {
	m := &dto.Metric{Label: labels, Counter: &dto.Counter{Value: &v}}
	if !at.IsZero() {
		ms := at.UnixMilli()
		m.TimestampMs = &ms
	}
	return m
}

func sample(v float64, labels []*dto.LabelPair, at time.Time) *dto.Metric {
	m := &dto.Metric{Label: labels, Gauge: &dto.Gauge{Value: &v}}
	if !at.IsZero() {
		ms := at.UnixMilli()
		m.TimestampMs = &ms
	}
	return m
}
