package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/controlplane"
	"github.com/syncpod/syncpod/internal/testnode"
)

// The node status of a syncpod-vk node on real containerd and a real API
// server: capacity from the host (less -system-reserved and the kubelet's
// eviction thresholds in allocatable), addresses, the daemon endpoint,
// nodeInfo with containerd's CRI Version; kubectl get node -o wide shows
// them. The Lease is renewed. A frozen containerd turns Ready False with
// the runtime named while the Lease is still renewed (the process is
// alive), and Ready True again after the thaw, each with a new transition
// time.
func TestRealNodeNodeStatus(t *testing.T) {
	n := testnode.Start(t)
	cp := controlplane.Start(t)
	kube := kubeClient(t, cp)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	o := options{nodeName: "vk-status", endpoint: n.Endpoint, podLogDir: filepath.Join(n.Dir, "pods"),
		podDir: filepath.Join(n.Dir, "kubelet-pods"), nodeIP: "127.0.0.1", taint: true, workers: 2,
		capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("50")},
		reserved: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}, kubeletPort: 10250}
	go func() { done <- runNode(ctx, kube, o, zap.NewNop()) }()
	t.Cleanup(func() { // before the control plane and the node go
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runNode: %v", err)
		}
	})

	v, err := n.RuntimeService().Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	wantRuntime := v.GetRuntimeName() + "://" + v.GetRuntimeVersion()
	if !strings.HasPrefix(wantRuntime, "containerd://") {
		t.Fatalf("runtime %s, want containerd", wantRuntime)
	}
	hostname, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")

	getNode := func() (*corev1.Node, string) {
		nd, err := kube.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
		if err != nil {
			return nil, err.Error()
		}
		return nd, ""
	}
	var nd *corev1.Node
	eventually(t, "a Ready node with its status", func() string {
		var msg string
		if nd, msg = getNode(); nd == nil {
			return msg
		}
		s := nd.Status
		ready := cond(s, corev1.NodeReady)
		if ready.Status != corev1.ConditionTrue || ready.Reason != "KubeletReady" {
			return fmt.Sprintf("Ready %+v", ready)
		}
		cpus := resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI)
		cpuAlloc := cpus.DeepCopy()
		cpuAlloc.Sub(resource.MustParse("100m"))
		memCap, memAlloc := s.Capacity[corev1.ResourceMemory], s.Allocatable[corev1.ResourceMemory]
		memCap.Sub(memAlloc)
		switch {
		case !s.Capacity.Cpu().Equal(*cpus) || !s.Allocatable.Cpu().Equal(cpuAlloc):
			return fmt.Sprintf("cpu %v / %v, want %v / %v", s.Capacity.Cpu(), s.Allocatable.Cpu(), cpus, &cpuAlloc)
		case s.Capacity.Memory().Value() < 256<<20 || memCap.Value() != 100<<20:
			return fmt.Sprintf("memory %v / %v, want the host's, less 100Mi", s.Capacity.Memory(), s.Allocatable.Memory())
		case s.Capacity.StorageEphemeral().Value() <= 0 || s.Allocatable.StorageEphemeral().Cmp(*s.Capacity.StorageEphemeral()) >= 0:
			return fmt.Sprintf("ephemeral-storage %v / %v", s.Capacity.StorageEphemeral(), s.Allocatable.StorageEphemeral())
		case s.Capacity.Pods().Value() != 50 || s.Allocatable.Pods().Value() != 50:
			return fmt.Sprintf("pods %v / %v, want the flag's 50", s.Capacity.Pods(), s.Allocatable.Pods())
		case len(s.Addresses) != 2 || s.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}) ||
			s.Addresses[1] != (corev1.NodeAddress{Type: corev1.NodeHostName, Address: strings.ToLower(hostname)}):
			return fmt.Sprintf("addresses %v", s.Addresses)
		case s.DaemonEndpoints.KubeletEndpoint.Port != 10250:
			return fmt.Sprintf("daemon endpoints %+v", s.DaemonEndpoints)
		case s.NodeInfo.ContainerRuntimeVersion != wantRuntime || s.NodeInfo.KernelVersion != strings.TrimSpace(string(kernel)) ||
			s.NodeInfo.BootID != strings.TrimSpace(string(bootID)) || s.NodeInfo.OSImage == "" || s.NodeInfo.KubeletVersion != kubeletVersion:
			return fmt.Sprintf("nodeInfo %+v, want runtime %s", s.NodeInfo, wantRuntime)
		}
		for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
			if cond(s, c).Reason == "" {
				return fmt.Sprintf("no %s: %v", c, s.Conditions)
			}
		}
		return ""
	})
	t.Logf("capacity %v allocatable %v nodeInfo %+v", nd.Status.Capacity, nd.Status.Allocatable, nd.Status.NodeInfo)
	out, err := cp.Kubectl(ctx, "get", "node", o.nodeName, "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get node -o wide:\n%s", out)
	for _, want := range []string{o.nodeName, "Ready", "127.0.0.1", nd.Status.NodeInfo.OSImage, nd.Status.NodeInfo.KernelVersion, wantRuntime} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubectl get node -o wide does not show %q", want)
		}
	}

	renewed := func(after time.Time) func() string {
		return func() string {
			l, err := kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, o.nodeName, metav1.GetOptions{})
			if err != nil {
				return "lease: " + err.Error()
			}
			if l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.After(after) {
				return fmt.Sprintf("lease renewed at %v, not after %v", l.Spec.RenewTime, after)
			}
			return ""
		}
	}
	start := time.Now()
	eventually(t, "the Lease renewed", renewed(start))
	readySince := cond(nd.Status, corev1.NodeReady).LastTransitionTime

	f, err := n.FreezeContainerd(t)
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	eventually(t, "Ready False naming the runtime", func() string {
		if nd, _ = getNode(); nd == nil {
			return "no node"
		}
		r := cond(nd.Status, corev1.NodeReady)
		if r.Status != corev1.ConditionFalse || r.Reason != "KubeletNotReady" || !strings.Contains(r.Message, "container runtime") {
			return fmt.Sprintf("Ready %+v", r)
		}
		return ""
	})
	r := cond(nd.Status, corev1.NodeReady)
	t.Logf("Ready False %v after the freeze: %s", time.Since(frozen).Round(time.Second), r.Message)
	if !r.LastTransitionTime.After(readySince.Time) {
		t.Errorf("Ready False since %v, not after Ready True's %v", r.LastTransitionTime, readySince)
	}
	notReadySince := r.LastTransitionTime
	eventually(t, "the Lease renewed while the runtime is frozen", renewed(time.Now()))
	if err := f.Thaw(); err != nil {
		t.Fatal(err)
	}
	thawed := time.Now()
	eventually(t, "Ready True again", func() string {
		if nd, _ = getNode(); nd == nil {
			return "no node"
		}
		if r := cond(nd.Status, corev1.NodeReady); r.Status != corev1.ConditionTrue || r.Reason != "KubeletReady" {
			return fmt.Sprintf("Ready %+v", r)
		}
		return ""
	})
	r = cond(nd.Status, corev1.NodeReady)
	t.Logf("Ready True %v after the thaw", time.Since(thawed).Round(time.Second))
	if !r.LastTransitionTime.After(notReadySince.Time) {
		t.Errorf("Ready True since %v, not after Ready False's %v", r.LastTransitionTime, notReadySince)
	}
}
