package main

import (
	"fmt"
	"runtime"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node status, built as the kubelet's node status setters build it
// (pkg/kubelet/nodestatus): capacity and allocatable, the pressure
// conditions and Ready, addresses, daemon endpoints and nodeInfo. The
// builder is pure: it is given what the host and the runtime reported
// (hostFacts, runtimeInfo), the agent's health and the time.

// kubeletVersion is the nodeInfo.kubeletVersion the node reports.
const kubeletVersion = "syncpod-vk"

// defaultKubeletPort is the kubelet API port the node advertises in its
// daemon endpoints unless options.kubeletPort says otherwise.
const defaultKubeletPort = 10250

// defaultMaxPods is the kubelet's maxPods default.
const defaultMaxPods = 110

// The kubelet's default hard eviction thresholds, which it also takes
// out of allocatable and which decide the pressure conditions here:
// memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%.
// The kubelet has no default pid.available threshold; syncpod-vk reports
// PIDPressure when fewer than 5% of the kernel's pid_max remain.
const (
	evictionMemoryAvailable  = 100 << 20
	evictionNodeFSPercent    = 10
	evictionInodesPercent    = 5
	pidPressurePercentRemain = 5
)

// simulatedCapacity is what each node of -nodes N advertises unless the
// flags say otherwise.
var simulatedCapacity = map[corev1.ResourceName]string{
	corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", corev1.ResourcePods: "110",
}

// hostFacts are what the host reported (readHostFacts); a zero field is
// one that could not be read.
type hostFacts struct {
	CPUs            int    // usable CPUs
	MemoryTotal     int64  // bytes, /proc/meminfo MemTotal
	MemoryAvailable int64  // bytes, /proc/meminfo MemAvailable
	FSCapacity      int64  // bytes of the pod directory's filesystem
	FSAvailable     int64  // bytes available to unprivileged users there
	FSInodes        uint64 // inodes of that filesystem
	FSInodesFree    uint64
	PIDMax          int64 // /proc/sys/kernel/pid_max
	PIDUsed         int64 // threads, /proc/loadavg
	KernelVersion   string
	OSImage         string // PRETTY_NAME of /etc/os-release
	MachineID       string
	SystemUUID      string
	BootID          string
	Hostname        string // lower-cased, as the kubelet's
	DefaultIP       string // an address of the default route's interface
}

// runtimeInfo is the CRI runtime's Version answer.
type runtimeInfo struct{ Name, Version string }

// String is nodeInfo.containerRuntimeVersion: "<RuntimeName>://<RuntimeVersion>".
func (r runtimeInfo) String() string {
	if r.Name == "" {
		return ""
	}
	return r.Name + "://" + r.Version
}

// statusConfig is what the flags set for the node status.
type statusConfig struct {
	// capacity holds the resources given by flags; the others come from
	// the host unless fixedCapacity.
	capacity corev1.ResourceList
	// reserved is taken out of allocatable (-system-reserved plus
	// -kube-reserved).
	reserved corev1.ResourceList
	// fixedCapacity: advertise capacity alone, nothing from the host and
	// no eviction threshold out of allocatable (-nodes N).
	fixedCapacity bool
	nodeIP        string // the InternalIP; empty: the host's default-route address
	kubeletPort   int32
}

// buildCapacity returns the node's capacity and allocatable. Capacity is
// the configured resources, then, unless fixedCapacity, cpu, memory,
// ephemeral-storage (the pod directory's filesystem) and pods (110) from
// the host for those not configured. Allocatable is capacity less
// reserved and, for host-backed nodes, the kubelet's hard eviction
// thresholds (memory 100Mi, ephemeral-storage 10%), never below zero.
func buildCapacity(cfg statusConfig, h hostFacts) (capacity, allocatable corev1.ResourceList) {
	capacity = corev1.ResourceList{}
	for name, q := range cfg.capacity {
		capacity[name] = q.DeepCopy()
	}
	if !cfg.fixedCapacity {
		fill := func(name corev1.ResourceName, q *resource.Quantity) {
			if _, ok := capacity[name]; !ok && q != nil {
				capacity[name] = *q
			}
		}
		if h.CPUs > 0 {
			fill(corev1.ResourceCPU, resource.NewQuantity(int64(h.CPUs), resource.DecimalSI))
		}
		if h.MemoryTotal > 0 {
			fill(corev1.ResourceMemory, resource.NewQuantity(h.MemoryTotal, resource.BinarySI))
		}
		if h.FSCapacity > 0 {
			fill(corev1.ResourceEphemeralStorage, resource.NewQuantity(h.FSCapacity, resource.BinarySI))
		}
		fill(corev1.ResourcePods, resource.NewQuantity(defaultMaxPods, resource.DecimalSI))
	}
	allocatable = corev1.ResourceList{}
	for name, q := range capacity {
		a := q.DeepCopy()
		if r, ok := cfg.reserved[name]; ok {
			a.Sub(r)
		}
		if !cfg.fixedCapacity {
			switch name {
			case corev1.ResourceMemory:
				a.Sub(*resource.NewQuantity(evictionMemoryAvailable, resource.BinarySI))
			case corev1.ResourceEphemeralStorage:
				a.Sub(*resource.NewQuantity(q.Value()*evictionNodeFSPercent/100, resource.BinarySI))
			}
		}
		if a.Sign() < 0 {
			a = *resource.NewQuantity(0, q.Format)
		}
		allocatable[name] = a
	}
	return capacity, allocatable
}

// condition is one condition as the kubelet words it.
type condition struct {
	status          corev1.ConditionStatus
	reason, message string
}

// pressure returns the kubelet's wording for one pressure condition.
func pressure(t corev1.NodeConditionType, under bool) condition {
	type words struct{ okReason, okMsg, badReason, badMsg string }
	w := map[corev1.NodeConditionType]words{
		corev1.NodeMemoryPressure: {"KubeletHasSufficientMemory", "kubelet has sufficient memory available",
			"KubeletHasInsufficientMemory", "kubelet has insufficient memory available"},
		corev1.NodeDiskPressure: {"KubeletHasNoDiskPressure", "kubelet has no disk pressure",
			"KubeletHasDiskPressure", "kubelet has disk pressure"},
		corev1.NodePIDPressure: {"KubeletHasSufficientPID", "kubelet has sufficient PID available",
			"KubeletHasInsufficientPID", "kubelet has insufficient PID available"},
	}[t]
	if under {
		return condition{corev1.ConditionTrue, w.badReason, w.badMsg}
	}
	return condition{corev1.ConditionFalse, w.okReason, w.okMsg}
}

// readyCondition is Ready as the kubelet words it: KubeletReady "kubelet
// is posting ready status", or KubeletNotReady with why the agent is not
// healthy (the runtime's or the PLEG's message, without the "agent: "
// prefix).
func readyCondition(unhealthy error) condition {
	if unhealthy == nil {
		return condition{corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"}
	}
	return condition{corev1.ConditionFalse, "KubeletNotReady", strings.TrimPrefix(unhealthy.Error(), "agent: ")}
}

// buildConditions returns MemoryPressure, DiskPressure, PIDPressure and
// Ready, in the kubelet's order. Each has LastHeartbeatTime now and keeps
// prev's LastTransitionTime unless its status changed. A figure the host
// did not report counts as no pressure. The fixed-capacity nodes of
// -nodes N report no pressure: they share one host, whose pressure is
// not theirs.
func buildConditions(prev []corev1.NodeCondition, cfg statusConfig, h hostFacts, unhealthy error, now metav1.Time) []corev1.NodeCondition {
	host := !cfg.fixedCapacity
	memory := host && h.MemoryTotal > 0 && h.MemoryAvailable < evictionMemoryAvailable
	disk := host && ((h.FSCapacity > 0 && h.FSAvailable*100 < h.FSCapacity*evictionNodeFSPercent) ||
		(h.FSInodes > 0 && h.FSInodesFree*100 < h.FSInodes*evictionInodesPercent))
	pid := host && h.PIDMax > 0 && (h.PIDMax-h.PIDUsed)*100 < h.PIDMax*pidPressurePercentRemain
	want := []struct {
		t corev1.NodeConditionType
		c condition
	}{
		{corev1.NodeMemoryPressure, pressure(corev1.NodeMemoryPressure, memory)},
		{corev1.NodeDiskPressure, pressure(corev1.NodeDiskPressure, disk)},
		{corev1.NodePIDPressure, pressure(corev1.NodePIDPressure, pid)},
		{corev1.NodeReady, readyCondition(unhealthy)},
	}
	out := make([]corev1.NodeCondition, 0, len(want))
	for _, w := range want {
		c := corev1.NodeCondition{Type: w.t, Status: w.c.status, Reason: w.c.reason, Message: w.c.message,
			LastHeartbeatTime: now, LastTransitionTime: now}
		for _, p := range prev {
			if p.Type == w.t && p.Status == w.c.status && !p.LastTransitionTime.IsZero() {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
		out = append(out, c)
	}
	return out
}

// buildStatus returns the whole node status from prev (the last one
// built, for the transition times; nil at first), the host's facts, the
// runtime's version and the agent's health (nil when healthy).
func buildStatus(prev *corev1.NodeStatus, cfg statusConfig, h hostFacts, rt runtimeInfo, unhealthy error, now metav1.Time) corev1.NodeStatus {
	var s corev1.NodeStatus
	s.Phase = corev1.NodeRunning
	s.Capacity, s.Allocatable = buildCapacity(cfg, h)
	var prevConds []corev1.NodeCondition
	if prev != nil {
		prevConds = prev.Conditions
	}
	s.Conditions = buildConditions(prevConds, cfg, h, unhealthy, now)
	ip := cfg.nodeIP
	if ip == "" {
		ip = h.DefaultIP
	}
	if ip != "" {
		s.Addresses = append(s.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	if h.Hostname != "" {
		s.Addresses = append(s.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: h.Hostname})
	}
	port := cfg.kubeletPort
	if port == 0 {
		port = defaultKubeletPort
	}
	s.DaemonEndpoints.KubeletEndpoint.Port = port
	s.NodeInfo = corev1.NodeSystemInfo{
		MachineID: h.MachineID, SystemUUID: h.SystemUUID, BootID: h.BootID,
		KernelVersion: h.KernelVersion, OSImage: h.OSImage,
		ContainerRuntimeVersion: rt.String(), KubeletVersion: kubeletVersion,
		OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
	}
	return s
}

// statusChange says how b differs from a: "" when only heartbeats (and
// nothing else) differ, "message" when only condition messages do
// (a runtime's "not answered for 12s" grows every second), else what
// changed first ("Ready", "capacity", "nodeInfo" ...).
func statusChange(a, b *corev1.NodeStatus) string {
	if a == nil || b == nil {
		return "status"
	}
	switch {
	case !equality.Semantic.DeepEqual(a.Capacity, b.Capacity):
		return "capacity"
	case !equality.Semantic.DeepEqual(a.Allocatable, b.Allocatable):
		return "allocatable"
	case !equality.Semantic.DeepEqual(a.Addresses, b.Addresses):
		return "addresses"
	case a.NodeInfo != b.NodeInfo:
		return "nodeInfo"
	case a.DaemonEndpoints != b.DaemonEndpoints:
		return "daemonEndpoints"
	case len(a.Conditions) != len(b.Conditions):
		return "conditions"
	}
	what := ""
	for i := range a.Conditions {
		ca, cb := a.Conditions[i], b.Conditions[i]
		if ca.Type != cb.Type || ca.Status != cb.Status || ca.Reason != cb.Reason || !ca.LastTransitionTime.Equal(&cb.LastTransitionTime) {
			return string(cb.Type)
		}
		if ca.Message != cb.Message {
			what = "message"
		}
	}
	return what
}

// parseResourceList parses a -system-reserved style value,
// "cpu=500m,memory=1Gi,ephemeral-storage=1Gi" ("" is none).
func parseResourceList(s string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: want name=quantity", kv)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s: %s is negative", k, v)
		}
		name := corev1.ResourceName(k)
		if prev, ok := out[name]; ok {
			q.Add(prev)
		}
		out[name] = q
	}
	return out, nil
}

// addResources returns a + b.
func addResources(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, l := range []corev1.ResourceList{a, b} {
		for name, q := range l {
			if prev, ok := out[name]; ok {
				q = q.DeepCopy()
				q.Add(prev)
			}
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// parseCapacity parses the capacity flags (an empty value is not
// configured) and the reserved ones. With fixed (-nodes N) the resources
// not configured get simulatedCapacity: the nodes share one host and one
// process, their pods run on simulated runtimes that use none of it, and
// N times the host's figures would advertise a cluster N times larger
// than the machine; fixed figures, as kubemark's hollow nodes have, keep
// the scheduler's view of each node the same from run to run.
func parseCapacity(flags map[corev1.ResourceName]string, systemReserved, kubeReserved string, fixed bool) (capacity, reserved corev1.ResourceList, err error) {
	capacity = corev1.ResourceList{}
	for name, v := range flags {
		if v == "" && fixed {
			v = simulatedCapacity[name]
		}
		if v == "" {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, nil, fmt.Errorf("capacity %s: %w", name, err)
		}
		if q.Sign() < 0 {
			return nil, nil, fmt.Errorf("capacity %s: %s is negative", name, v)
		}
		capacity[name] = q
	}
	sys, err := parseResourceList(systemReserved)
	if err != nil {
		return nil, nil, fmt.Errorf("-system-reserved: %w", err)
	}
	kube, err := parseResourceList(kubeReserved)
	if err != nil {
		return nil, nil, fmt.Errorf("-kube-reserved: %w", err)
	}
	return capacity, addResources(sys, kube), nil
}

// nodeStatusConfig is the status part of the command's options.
func nodeStatusConfig(o options) statusConfig {
	return statusConfig{capacity: o.capacity, reserved: o.reserved, fixedCapacity: o.fixedCapacity,
		nodeIP: o.nodeIP, kubeletPort: int32(o.kubeletPort)}
}

// statusFSPath is the directory whose filesystem is the node's ephemeral
// storage: the pod directory, else the pod log directory, else /.
func statusFSPath(o options) string {
	for _, d := range []string{o.podDir, o.podLogDir} {
		if d != "" {
			return d
		}
	}
	return "/"
}
