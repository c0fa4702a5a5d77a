package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"
)

// testHost is a host with 4 CPUs, 16Gi of memory (8Gi available), a
// 100Gi pod filesystem half free, and a few hundred threads.
func testHost() hostFacts {
	return hostFacts{CPUs: 4, MemoryTotal: 16 << 30, MemoryAvailable: 8 << 30,
		FSCapacity: 100 << 30, FSAvailable: 50 << 30, FSInodes: 1000, FSInodesFree: 900,
		PIDMax: 32768, PIDUsed: 300, KernelVersion: "6.1.0-test", OSImage: "Debian GNU/Linux 12 (bookworm)",
		MachineID: "m1", SystemUUID: "u1", BootID: "b1", Hostname: "host-a", DefaultIP: "192.0.2.7"}
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) string {
	q, ok := l[name]
	if !ok {
		return "<none>"
	}
	return q.String()
}

func cond(s corev1.NodeStatus, t corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// Capacity comes from the host for what no flag gives; allocatable is
// capacity less the reserved resources and the kubelet's hard eviction
// thresholds.
func TestBuildCapacityFromHost(t *testing.T) {
	cfg := statusConfig{capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		reserved: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	capacity, alloc := buildCapacity(cfg, testHost())
	for _, c := range []struct {
		l          corev1.ResourceList
		name       corev1.ResourceName
		want, what string
	}{
		{capacity, corev1.ResourceCPU, "2", "flag"},
		{capacity, corev1.ResourceMemory, "16Gi", "MemTotal"},
		{capacity, corev1.ResourceEphemeralStorage, "100Gi", "pod filesystem"},
		{capacity, corev1.ResourcePods, "110", "default"},
		{alloc, corev1.ResourceCPU, "1500m", "less reserved"},
		{alloc, corev1.ResourceMemory, "15260Mi", "less reserved and 100Mi"},
		{alloc, corev1.ResourceEphemeralStorage, "90Gi", "less 10%"},
		{alloc, corev1.ResourcePods, "110", "unchanged"},
	} {
		if got := quantity(c.l, c.name); got != c.want {
			t.Errorf("%s (%s) = %s, want %s", c.name, c.what, got, c.want)
		}
	}
}

// -nodes N: the fixed figures alone, nothing from the host, no eviction
// threshold; reserved is still taken out, and never below zero.
func TestBuildCapacityFixed(t *testing.T) {
	c, _, err := parseCapacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "", corev1.ResourceMemory: "",
		corev1.ResourceEphemeralStorage: "", corev1.ResourcePods: "20"}, "cpu=1", "cpu=9", true)
	if err != nil {
		t.Fatal(err)
	}
	cfg := statusConfig{capacity: c, fixedCapacity: true, reserved: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}}
	capacity, alloc := buildCapacity(cfg, testHost())
	if got := quantity(capacity, corev1.ResourceCPU) + " " + quantity(capacity, corev1.ResourceMemory) + " " +
		quantity(capacity, corev1.ResourcePods) + " " + quantity(capacity, corev1.ResourceEphemeralStorage); got != "8 32Gi 20 <none>" {
		t.Errorf("capacity = %s, want 8 32Gi 20 <none>", got)
	}
	if got := quantity(alloc, corev1.ResourceCPU) + " " + quantity(alloc, corev1.ResourceMemory); got != "0 32Gi" {
		t.Errorf("allocatable = %s, want 0 32Gi", got)
	}
}

func TestParseCapacityErrors(t *testing.T) {
	for _, c := range []struct{ cpu, sys, kube, want string }{
		{"x", "", "", "capacity cpu"},
		{"-1", "", "", "negative"},
		{"", "cpu", "", "-system-reserved"},
		{"", "", "memory=-1Gi", "-kube-reserved"},
		{"", "cpu=1x", "", "-system-reserved"},
	} {
		_, _, err := parseCapacity(map[corev1.ResourceName]string{corev1.ResourceCPU: c.cpu}, c.sys, c.kube, false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cpu %q sys %q kube %q: err %v, want one naming %q", c.cpu, c.sys, c.kube, err, c.want)
		}
	}
	_, res, err := parseCapacity(nil, "cpu=500m, memory=1Gi", "cpu=500m", false)
	if err != nil || quantity(res, corev1.ResourceCPU) != "1" || quantity(res, corev1.ResourceMemory) != "1Gi" {
		t.Errorf("reserved = %v, %v; want cpu 1 memory 1Gi", res, err)
	}
}

// Ready as the kubelet words it, the runtime named when it is down; the
// pressure conditions from the host's figures; transition times move
// only on a transition, heartbeats on every build.
func TestBuildConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	t2 := metav1.NewTime(t1.Add(time.Minute))
	cfg := statusConfig{}
	h := testHost()
	s0 := buildStatus(nil, cfg, h, runtimeInfo{"containerd", "2.4.2"}, nil, t0)
	ready := cond(s0, corev1.NodeReady)
	if ready.Status != corev1.ConditionTrue || ready.Reason != "KubeletReady" || ready.Message != "kubelet is posting ready status" {
		t.Errorf("Ready = %+v", ready)
	}
	for _, c := range []struct {
		t      corev1.NodeConditionType
		reason string
	}{{corev1.NodeMemoryPressure, "KubeletHasSufficientMemory"}, {corev1.NodeDiskPressure, "KubeletHasNoDiskPressure"},
		{corev1.NodePIDPressure, "KubeletHasSufficientPID"}} {
		if got := cond(s0, c.t); got.Status != corev1.ConditionFalse || got.Reason != c.reason {
			t.Errorf("%s = %+v, want False %s", c.t, got, c.reason)
		}
	}
	if got := s0.Conditions[len(s0.Conditions)-1].Type; got != corev1.NodeReady {
		t.Errorf("last condition %s, want Ready (the kubelet's order)", got)
	}

	down := errors.New("agent: container runtime is not responding: its Status has not answered for 12s (bound 10s)")
	h.MemoryAvailable, h.FSInodesFree, h.PIDUsed = 50<<20, 10, 32000
	s1 := buildStatus(&s0, cfg, h, runtimeInfo{"containerd", "2.4.2"}, down, t1)
	ready = cond(s1, corev1.NodeReady)
	if ready.Status != corev1.ConditionFalse || ready.Reason != "KubeletNotReady" ||
		ready.Message != "container runtime is not responding: its Status has not answered for 12s (bound 10s)" {
		t.Errorf("Ready when the runtime is down = %+v", ready)
	}
	for _, c := range []struct {
		t      corev1.NodeConditionType
		reason string
	}{{corev1.NodeMemoryPressure, "KubeletHasInsufficientMemory"}, {corev1.NodeDiskPressure, "KubeletHasDiskPressure"},
		{corev1.NodePIDPressure, "KubeletHasInsufficientPID"}} {
		if got := cond(s1, c.t); got.Status != corev1.ConditionTrue || got.Reason != c.reason || !got.LastTransitionTime.Equal(&t1) {
			t.Errorf("%s = %+v, want True %s since t1", c.t, got, c.reason)
		}
	}
	if got := statusChange(&s0, &s1); got != string(corev1.NodeMemoryPressure) {
		t.Errorf("change = %q, want MemoryPressure first", got)
	}

	// Still down, a later message: no transition, a new heartbeat.
	later := errors.New("agent: container runtime is not responding: its Status has not answered for 72s (bound 10s)")
	s2 := buildStatus(&s1, cfg, h, runtimeInfo{"containerd", "2.4.2"}, later, t2)
	ready = cond(s2, corev1.NodeReady)
	if !ready.LastTransitionTime.Equal(&t1) || !ready.LastHeartbeatTime.Equal(&t2) {
		t.Errorf("Ready times: transition %v heartbeat %v, want %v and %v", ready.LastTransitionTime, ready.LastHeartbeatTime, t1, t2)
	}
	if got := statusChange(&s1, &s2); got != "message" {
		t.Errorf("change = %q, want message", got)
	}
	s3 := buildStatus(&s2, cfg, h, runtimeInfo{"containerd", "2.4.2"}, later, metav1.NewTime(t2.Add(time.Second)))
	if got := statusChange(&s2, &s3); got != "" {
		t.Errorf("change of heartbeats only = %q, want none", got)
	}

	// Fixed-capacity nodes share the host: its pressure is not theirs.
	s4 := buildStatus(nil, statusConfig{fixedCapacity: true}, h, runtimeInfo{}, nil, t0)
	for _, c := range s4.Conditions {
		if c.Type != corev1.NodeReady && c.Status != corev1.ConditionFalse {
			t.Errorf("fixed-capacity %s = %s, want False", c.Type, c.Status)
		}
	}
}

// Addresses, the daemon endpoint and nodeInfo.
func TestBuildStatusIdentity(t *testing.T) {
	now := metav1.Now()
	s := buildStatus(nil, statusConfig{}, testHost(), runtimeInfo{"containerd", "2.4.2"}, nil, now)
	want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.7"}, {Type: corev1.NodeHostName, Address: "host-a"}}
	if len(s.Addresses) != 2 || s.Addresses[0] != want[0] || s.Addresses[1] != want[1] {
		t.Errorf("addresses %v, want %v", s.Addresses, want)
	}
	if s.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("kubelet port %d, want 10250", s.DaemonEndpoints.KubeletEndpoint.Port)
	}
	ni := s.NodeInfo
	if ni.ContainerRuntimeVersion != "containerd://2.4.2" || ni.KernelVersion != "6.1.0-test" || ni.OSImage != "Debian GNU/Linux 12 (bookworm)" ||
		ni.MachineID != "m1" || ni.SystemUUID != "u1" || ni.BootID != "b1" || ni.KubeletVersion != kubeletVersion || ni.OperatingSystem == "" || ni.Architecture == "" {
		t.Errorf("nodeInfo %+v", ni)
	}
	s = buildStatus(nil, statusConfig{nodeIP: "10.0.0.5", kubeletPort: 20250}, testHost(), runtimeInfo{}, nil, now)
	if s.Addresses[0].Address != "10.0.0.5" || s.DaemonEndpoints.KubeletEndpoint.Port != 20250 || s.NodeInfo.ContainerRuntimeVersion != "" {
		t.Errorf("with -node-ip and a port: %v %v %q", s.Addresses, s.DaemonEndpoints, s.NodeInfo.ContainerRuntimeVersion)
	}
}

func TestParseHostFiles(t *testing.T) {
	total, avail := parseMeminfo([]byte("MemTotal:       16384 kB\nMemFree:  100 kB\nMemAvailable:    8192 kB\n"))
	if total != 16384*1024 || avail != 8192*1024 {
		t.Errorf("meminfo: %d %d", total, avail)
	}
	if got := parseLoadavgThreads([]byte("0.52 0.58 0.59 3/467 12345\n")); got != 467 {
		t.Errorf("loadavg threads %d, want 467", got)
	}
	if got := parseLoadavgThreads([]byte("junk")); got != 0 {
		t.Errorf("bad loadavg: %d", got)
	}
	if got := parseOSRelease([]byte("NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n")); got != "Debian GNU/Linux 12 (bookworm)" {
		t.Errorf("os-release %q", got)
	}
	route := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth1\t00000000\t0102000A\t0003\t0\t0\t200\t00000000\t0\t0\t0\n" +
		"eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n" +
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	if got := parseDefaultRouteInterface([]byte(route)); got != "eth0" {
		t.Errorf("default route interface %q, want eth0 (the lower metric)", got)
	}
	if got := parseDefaultRouteInterface([]byte("Iface\tDestination\n")); got != "" {
		t.Errorf("no default route: %q", got)
	}
	h := readHostFacts(t.TempDir() + "/not/yet")
	if h.CPUs < 1 || h.FSCapacity <= 0 {
		t.Errorf("this host: %+v", h)
	}
}

// statusHarness runs a nodeStatus on a fake clock, with a health, a
// version and host figures the test sets.
type statusHarness struct {
	clk *testclock.FakeClock
	s   *nodeStatus

	mu     sync.Mutex
	health error
	rt     runtimeInfo
	host   hostFacts
	calls  int // Version calls
}

func newStatusHarness(t *testing.T, unhealthy error) *statusHarness {
	h := &statusHarness{clk: testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		health: unhealthy, rt: runtimeInfo{"containerd", "2.4.2"}, host: testHost()}
	h.s = newNodeStatus(statusConfig{}, h.clk, zap.NewNop(),
		func() error { h.mu.Lock(); defer h.mu.Unlock(); return h.health },
		func(context.Context) (runtimeInfo, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.calls++
			return h.rt, nil
		},
		func() hostFacts { h.mu.Lock(); defer h.mu.Unlock(); return h.host },
		h.rt, h.host)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk", Labels: map[string]string{"type": "virtual-kubelet"}}}
	h.s.register(n)
	if got := cond(n.Status, corev1.NodeReady).Status; (unhealthy == nil) != (got == corev1.ConditionTrue) {
		t.Fatalf("registered Ready %s with health %v", got, unhealthy)
	}
	return h
}

func (h *statusHarness) set(f func()) { h.mu.Lock(); defer h.mu.Unlock(); f() }

// step moves the fake clock by d, polling after each healthPollPeriod as
// the ticker of NotifyNodeStatus would (TestNotifyNodeStatusGoroutine
// runs the ticker itself), and returns what the polls pushed.
func (h *statusHarness) step(d time.Duration) []*corev1.Node {
	var out []*corev1.Node
	for left := d; left > 0; left -= healthPollPeriod {
		h.clk.Step(healthPollPeriod)
		if n := h.s.poll(context.Background()); n != nil {
			out = append(out, n)
		}
	}
	return out
}

// A change of Ready is pushed at the next poll, a second after it; the
// heartbeats alone are not pushed; a runtime's growing message is pushed
// once per refresh period; the runtime's version is read each refresh
// period and not while it is down; a new version and new host figures
// are pushed.
func TestNodeStatusPushesEveryChange(t *testing.T) {
	h := newStatusHarness(t, errors.New("agent: PLEG is not healthy: pleg has yet to be successful"))
	if got := h.step(5 * time.Second); len(got) != 0 {
		t.Fatalf("pushed %d statuses while nothing changed", len(got))
	}
	h.set(func() { h.health = nil })
	got := h.step(healthPollPeriod)
	if len(got) != 1 {
		t.Fatalf("%d pushes a poll after the node became healthy, want 1", len(got))
	}
	n := got[0]
	ready := cond(n.Status, corev1.NodeReady)
	if ready.Status != corev1.ConditionTrue || !ready.LastTransitionTime.Time.Equal(h.clk.Now()) {
		t.Errorf("Ready %+v, want True since now (%v)", ready, h.clk.Now())
	}
	if n.Name != "vk" || n.Labels["type"] != "virtual-kubelet" || n.Status.NodeInfo.ContainerRuntimeVersion != "containerd://2.4.2" {
		t.Errorf("pushed node %s %v %q", n.Name, n.Labels, n.Status.NodeInfo.ContainerRuntimeVersion)
	}
	becameReady := ready.LastTransitionTime

	// The runtime freezes: pushed at once, named; its growing message
	// only every refresh period, and no Version call while it is down.
	h.set(func() {
		h.calls = 0
		h.health = errors.New("agent: container runtime is not responding: its Status has not answered for 11s (bound 10s)")
	})
	got = h.step(healthPollPeriod)
	if len(got) != 1 || cond(got[0].Status, corev1.NodeReady).Status != corev1.ConditionFalse ||
		!strings.HasPrefix(cond(got[0].Status, corev1.NodeReady).Message, "container runtime is not responding") {
		t.Fatalf("pushes when the runtime froze: %d, want 1 with Ready False naming the runtime", len(got))
	}
	h.set(func() {
		h.health = errors.New("agent: container runtime is not responding: its Status has not answered for 12s (bound 10s)")
	})
	if got = h.step(statusRefreshPeriod - healthPollPeriod); len(got) != 0 {
		t.Errorf("%d pushes of a new message within the refresh period, want 0", len(got))
	}
	if got = h.step(healthPollPeriod); len(got) != 1 || !strings.Contains(cond(got[0].Status, corev1.NodeReady).Message, "12s") {
		t.Errorf("%d pushes at the refresh period, want 1 with the new message", len(got))
	}
	h.set(func() {
		if h.calls != 0 {
			t.Errorf("%d Version calls while the runtime was down", h.calls)
		}
	})

	// The runtime comes back upgraded: Ready and the new version, pushed
	// at once; the transition time is the new one.
	h.set(func() { h.health, h.rt = nil, runtimeInfo{"containerd", "2.5.0"} })
	got = h.step(healthPollPeriod)
	if len(got) != 1 || got[0].Status.NodeInfo.ContainerRuntimeVersion != "containerd://2.5.0" {
		t.Fatalf("pushes when the runtime came back: %v, want 1 with containerd://2.5.0", got)
	}
	if r := cond(got[0].Status, corev1.NodeReady); r.Status != corev1.ConditionTrue || !r.LastTransitionTime.After(becameReady.Time) {
		t.Errorf("Ready %+v after the runtime came back", r)
	}

	// Capacity and pressure from the host figures, read every refresh period.
	h.set(func() { h.host.MemoryTotal = 32 << 30 })
	if got = h.step(statusRefreshPeriod); len(got) != 1 || quantity(got[0].Status.Capacity, corev1.ResourceMemory) != "32Gi" {
		t.Fatalf("pushes of a new memory capacity: %d", len(got))
	}
	h.set(func() { h.host.FSAvailable = 1 << 30 })
	if got = h.step(statusRefreshPeriod); len(got) != 1 || cond(got[0].Status, corev1.NodeDiskPressure).Status != corev1.ConditionTrue {
		t.Fatalf("pushes of disk pressure: %d", len(got))
	}
	h.set(func() { h.calls = 0 })
	if got = h.step(3 * statusRefreshPeriod); len(got) != 0 {
		t.Errorf("%d pushes with nothing changed", len(got))
	}
	h.set(func() {
		if h.calls != 3 {
			t.Errorf("%d Version calls in 3 refresh periods, want 3", h.calls)
		}
	})
}

// NotifyNodeStatus's goroutine polls on the clock's ticker, pushes a
// change to the callback, and ends with its context (goleak checks).
func TestNotifyNodeStatusGoroutine(t *testing.T) {
	h := newStatusHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	pushed := make(chan *corev1.Node, 1)
	h.s.NotifyNodeStatus(ctx, func(n *corev1.Node) { pushed <- n })
	h.set(func() {
		h.health = errors.New("agent: container runtime is not responding: its last Status failed: boom")
	})
	for !h.clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	h.clk.Step(healthPollPeriod)
	select {
	case n := <-pushed:
		if r := cond(n.Status, corev1.NodeReady); r.Status != corev1.ConditionFalse || r.Reason != "KubeletNotReady" {
			t.Errorf("pushed Ready %+v", r)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no push after a tick")
	}
	cancel()
	if err := h.s.Ping(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ping after the end = %v", err)
	}
}
