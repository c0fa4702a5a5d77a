package shim_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/examples/crishim/shim"
	"github.com/syncpod/syncpod/internal/kubelethost"
	"github.com/syncpod/syncpod/internal/testnode"
)

// envKubeletBurst turns on TestKubeletBurstThroughShim, which takes minutes.
const envKubeletBurst = "SYNCPOD_KUBELET_BURST"

// kubeletBurstPods is how many static pods the burst writes at once.
const kubeletBurstPods = 50

// TestKubeletBurstThroughShim measures, for each mode, what the real
// kubelet reports while 50 static pods appear at once and are then
// deleted at once: its PLEG relist duration and its pod start duration
// (a standalone kubelet exports no pod start SLI), and how long until
// containerd runs every pod. It only logs numbers; on a shared machine
// they are not stable enough to assert on. Each mode gets a node of its
// own, one after the other, so they do not load each other.
//
//	SYNCPOD_KUBELET_BURST=1 SYNCPOD_REALNODE=require go test -run KubeletBurst -v ./examples/crishim/shim
func TestKubeletBurstThroughShim(t *testing.T) {
	if os.Getenv(envKubeletBurst) != "1" {
		t.Skipf("set %s=1 to measure the kubelet with a %d-pod burst (minutes)", envKubeletBurst, kubeletBurstPods)
	}
	report := burstModes(t, nil)
	t.Logf("kubelet %s, %d static pods at once:\n%s", kubelethost.Version, kubeletBurstPods, report)
}

// burstModes runs the burst in every kubelet mode, each on a node of its
// own, and returns their lines.
func burstModes(t *testing.T, disk *testnode.DiskLimits) string {
	var report []string
	for _, m := range kubeletModes {
		t.Run(m.name, func(t *testing.T) {
			report = append(report, runBurst(t, m, disk)...)
		})
	}
	return strings.Join(report, "\n")
}

// TestKubeletBurstSlowDisk is scenario (c) of the stalled-runtime
// benchmark: the 50-pod burst of TestKubeletBurstThroughShim with
// containerd's disk throttled to testnode.SmallCloudDisk (containerd's
// metadata store syncs every transaction, so each sandbox and container
// creation pays for it), in every mode.
//
//	SYNCPOD_KUBELET_BURST=1 SYNCPOD_REALNODE=require go test -run KubeletBurstSlowDisk -v ./examples/crishim/shim
func TestKubeletBurstSlowDisk(t *testing.T) {
	if os.Getenv(envKubeletBurst) != "1" {
		t.Skipf("set %s=1 to measure the kubelet with a %d-pod burst on a slow disk (minutes)", envKubeletBurst, kubeletBurstPods)
	}
	report := burstModes(t, &testnode.SmallCloudDisk)
	t.Logf("kubelet %s, %d static pods at once, containerd's disk at %+v:\n%s", kubelethost.Version, kubeletBurstPods, testnode.SmallCloudDisk, report)
}

// runBurst writes the burst and deletes it, with containerd's disk
// throttled to disk when it is not nil (after the image is pulled). It
// fails t when a pod did not end with exactly one sandbox and one app
// container, created once.
func runBurst(t *testing.T, m kubeletMode, disk *testnode.DiskLimits) []string {
	n, k := kubeletOnNode(t, m)
	img := n.PushImage(t, "kubelet/burst")
	h := healthWatch{t: t, k: k, threshold: m.plegThreshold()}
	// The pull, the create and the delete (each polled up to 8 min).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	// Pulled beforehand: the burst measures pod starts, not one pull
	// that every pod waits for.
	if _, err := n.ImageService().PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
		t.Fatal(err)
	}
	scrape := func(name string) kubelethost.Histogram {
		t.Helper()
		hist, err := k.Histogram(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return hist
	}
	running := func() (int, int) {
		var run, sandboxes int
		for _, v := range runtimeView(t, n, k) {
			if v.readySandbox() {
				sandboxes++
			}
			if v.running("app") {
				run++
			}
		}
		return run, sandboxes
	}

	if disk != nil {
		d, err := n.SlowDisk(t, *disk)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := d.Undo(); err != nil {
				t.Error(err)
			}
		}()
	}
	relist0, start0 := scrape(kubelethost.RelistDurationMetric), scrape(kubelethost.PodStartMetric)
	ops0 := runtimeOps(t, ctx, k)
	began := time.Now()
	for i := range kubeletBurstPods {
		p := staticPod(fmt.Sprintf("burst-%02d", i), nil, workloadContainer("app", img, "pause"))
		if err := k.WriteStaticPod(p); err != nil {
			t.Fatal(err)
		}
	}
	pollUntil(t, h, fmt.Sprintf("%d pods to run", kubeletBurstPods), 8*time.Minute, func() (bool, string) {
		run, _ := running()
		return run == kubeletBurstPods, fmt.Sprintf("%d of %d running", run, kubeletBurstPods)
	})
	allRunning := time.Since(began)
	var created string // the shim's counters over the create
	if s, ok := shimsByNode.Load(n); ok {
		created = fmt.Sprintf("%+v", s.(*shim.Shim).Stats())
	}
	relist1, start1 := scrape(kubelethost.RelistDurationMetric), scrape(kubelethost.PodStartMetric)
	ops1 := runtimeOps(t, ctx, k)
	var lost []string
	pods := runtimeView(t, n, k)
	for i := range kubeletBurstPods {
		name := fmt.Sprintf("burst-%02d", i)
		switch v := pods[name]; {
		case v == nil:
			lost = append(lost, name+": no sandbox")
		case len(v.sandboxes) != 1:
			lost = append(lost, fmt.Sprintf("%s: %d sandboxes", name, len(v.sandboxes)))
		case v.containers["app"].GetMetadata().GetAttempt() != 0:
			lost = append(lost, fmt.Sprintf("%s: app attempt %d", name, v.containers["app"].GetMetadata().GetAttempt()))
		}
	}
	if d := containerCount(t, n) - kubeletBurstPods; d != 0 {
		lost = append(lost, fmt.Sprintf("%d containers more than pods", d))
	}
	if len(lost) > 0 {
		t.Errorf("%s: after the burst: %s", m.name, strings.Join(lost, "; "))
	}

	began = time.Now()
	for i := range kubeletBurstPods {
		if err := k.RemoveStaticPod(fmt.Sprintf("burst-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	pollUntil(t, h, "every pod to stop", 8*time.Minute, func() (bool, string) {
		run, ready := running()
		return run == 0 && ready == 0, fmt.Sprintf("%d running, %d sandboxes ready", run, ready)
	})
	allStopped := time.Since(began)
	relist2 := scrape(kubelethost.RelistDurationMetric)
	criErrs, err := k.CRIErrors()
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{
		fmt.Sprintf("%-10s create: all running after %v; relists meanwhile %v", m.name, allRunning.Round(10*time.Millisecond), relist1.Sub(relist0)),
		fmt.Sprintf("%-10s create: %v", m.name, start1.Sub(start0)),
		fmt.Sprintf("%-10s delete: all stopped after %v; relists meanwhile %v", m.name, allStopped.Round(10*time.Millisecond), relist2.Sub(relist1)),
		fmt.Sprintf("%-10s %d CRI errors in the kubelet log%s", m.name, len(criErrs), errorKinds(criErrs)),
		fmt.Sprintf("%-10s relist quantiles over the create: p50≤%.3gs p99≤%.3gs max≤%.3gs; pod start p50≤%.3gs p99≤%.3gs; lost %d",
			m.name, relist1.Sub(relist0).Quantile(0.5), relist1.Sub(relist0).Quantile(0.99), maxBound(relist1.Sub(relist0)),
			start1.Sub(start0).Quantile(0.5), start1.Sub(start0).Quantile(0.99), len(lost)),
	}
	if s, ok := shimsByNode.Load(n); ok {
		sh := s.(*shim.Shim)
		st, vs := sh.Stats(), sh.View().Stats()
		lines = append(lines, fmt.Sprintf("%-10s shim after the create: %s", m.name, created),
			fmt.Sprintf("%-10s shim after the delete: %+v; view: %d status calls, %d relists, %d events", m.name, st, vs.StatusCalls, vs.Relists, vs.Events))
	}
	// The relist's own CRI calls, as the kubelet timed them.
	for _, op := range listOps {
		h := ops1[op].Sub(ops0[op])
		lines = append(lines, fmt.Sprintf("%-10s create: kubelet's %s: n=%d p50≤%.3gs p99≤%.3gs max≤%.3gs", m.name, op, h.Count, h.Quantile(0.5), h.Quantile(0.99), maxBound(h)))
	}
	for _, l := range lines {
		t.Log(l)
	}
	return lines
}

// errorKinds counts CRI errors by code and message, one kind a line.
func errorKinds(errs []kubelethost.LogEntry) string {
	kinds := map[string]int{}
	for _, e := range errs {
		kinds[e.Code()+": "+e.Message]++
	}
	var b strings.Builder
	for _, kind := range slices.Sorted(maps.Keys(kinds)) {
		fmt.Fprintf(&b, "\n    %d x %s", kinds[kind], kind)
	}
	return b.String()
}
