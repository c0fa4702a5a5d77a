package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/internal/kubelethost"
	"github.com/syncpod/syncpod/internal/testnode"
)

// startResult is one orchestrator's run of one scenario as the runtime
// saw it.
type startResult struct {
	Scenario, Mode string
	Pods, Started  int
	Makespan       time.Duration // the slowest measured pod's startup
	P50, P99       time.Duration
	TimedOut       bool
	// Usage is the CPU the run cost (zero for the lower bound).
	Usage runUsage
	// Calls is each CRI method's latencies, from the agent's criclient
	// observer (agent modes only).
	Calls map[string]callLatency
	// Bound explains a lower-bound row.
	Bound string
}

// boundMode names the lower-bound rows.
const boundMode = "lower-bound"

func newStartResult(scenario, mode string, pods int, startups []time.Duration, timedOut bool) startResult {
	r := startResult{Scenario: scenario, Mode: mode, Pods: pods, Started: len(startups), TimedOut: timedOut}
	if len(startups) > 0 {
		r.Makespan = startups[len(startups)-1]
		r.P50, r.P99 = percentile(startups, 50), percentile(startups, 99)
	}
	return r
}

// kubeletColumn is one way the benchmark runs the real kubelet.
type kubeletColumn struct {
	Mode string
	// Options configure the kubelet.
	Options []kubelethost.Option
	// Downloads is containerd's max_concurrent_downloads during the
	// column's runs (0: the node's default, containerd's 3).
	Downloads int
}

// The tuned kubelet's settings for a burst. maxParallelImagePulls 10 is
// more than the images any scenario pulls at once (5 in big-image), so
// no pull waits for another; registryPullQPS 0 lifts the limit of 5 pulls
// a second with a burst of 10, over which a pull fails rather than waits;
// kubelet v1.37.2 accepts the EventedPLEG gate (ALPHA,
// TestRealNodeKubeletTuned in internal/kubelethost), which replaces the
// 1 s relist by containerd's event stream.
const (
	tunedParallelPulls = 10
	// tunedDownloads is containerd's max_concurrent_downloads in
	// kubelet-tuned-cd. containerd 2.4 pulls CRI images through its
	// transfer service, whose limit is one for the whole node, not per
	// image: at the default of 3, parallel pulls wait for each other's
	// layers. The benchmark's images have two layers each, one of them
	// the program layer they share, so big-image's five pulls need 6
	// downloads at once: 8 covers them with room, while staying near the
	// small values operators are advised to use rather than unbounded.
	tunedDownloads = 8
)

func tunedKubeletOptions() []kubelethost.Option {
	return []kubelethost.Option{
		kubelethost.WithParallelImagePulls(tunedParallelPulls),
		kubelethost.WithRegistryPullQPS(0),
		kubelethost.WithFeatureGate("EventedPLEG", true),
	}
}

// kubeletColumns are the benchmark's kubelet columns: the kubelet at its
// defaults (serial pulls, the generic PLEG relisting every second), tuned
// for a burst, and tuned on a containerd tuned for parallel downloads.
var kubeletColumns = []kubeletColumn{
	{Mode: "kubelet"},
	{Mode: "kubelet-tuned", Options: tunedKubeletOptions()},
	{Mode: "kubelet-tuned-cd", Options: tunedKubeletOptions(), Downloads: tunedDownloads},
}

// kubeletColumnByMode returns the column of mode.
func kubeletColumnByMode(mode string) (kubeletColumn, bool) {
	for _, c := range kubeletColumns {
		if c.Mode == mode {
			return c, true
		}
	}
	return kubeletColumn{}, false
}

// runKubeletScenario runs sc's pods as static pods of a real kubelet
// configured as col on n's containerd (set to col's downloads for the
// run, and back to containerd's default after it).
func runKubeletScenario(b testing.TB, n *testnode.Node, col kubeletColumn, sc Scenario, real *realImages, timeout time.Duration) startResult {
	pods := real.rewrite(sc.Pods)
	measured := sc.measures
	want := 0
	for _, p := range pods {
		if measured(p.Namespace + "/" + p.Name) {
			want++
		}
	}
	if col.Downloads > 0 {
		n.SetMaxConcurrentDownloads(b, col.Downloads)
		defer n.SetMaxConcurrentDownloads(b, 3)
	}
	startups, timedOut, usage := runKubelet(b, n, sc.Name+", "+col.Mode, col.Options, pods, measured, sc.Churn, time.Now().Add(timeout))
	r := newStartResult(sc.Name, col.Mode, want, startups, timedOut)
	r.Usage = usage
	return r
}

// kubeletExternal runs the cpu-burst's pods as static pods of the real
// kubelet of mode's column, all written at once, on n's containerd.
func kubeletExternal(b testing.TB, n *testnode.Node) func(context.Context, string, []*corev1.Pod, time.Time) ([]time.Duration, bool, error) {
	return func(_ context.Context, mode string, pods []*corev1.Pod, deadline time.Time) ([]time.Duration, bool, error) {
		col, ok := kubeletColumnByMode(mode)
		if !ok {
			return nil, false, fmt.Errorf("no kubelet column %q", mode)
		}
		if col.Downloads > 0 {
			n.SetMaxConcurrentDownloads(b, col.Downloads)
			defer n.SetMaxConcurrentDownloads(b, 3)
		}
		startups, timedOut, _ := runKubelet(b, n, "cpu-burst, "+mode, col.Options, pods, func(string) bool { return true }, nil, deadline)
		return startups, timedOut, nil
	}
}

// runKubelet starts a kubelet with opts on n's containerd and hands it pods as
// static pods: all at once, or in churn's rhythm when churn is set. It
// returns the startups of the pods measured accepts, read from
// containerd's timestamps, whether deadline passed first, and the CPU the
// run cost from the first pod handed over to the last one measured. The
// kubelet is stopped and every sandbox removed before it returns.
func runKubelet(b testing.TB, n *testnode.Node, what string, opts []kubelethost.Option, pods []*corev1.Pod, measured func(string) bool, churnSpec *ChurnSpec, deadline time.Time) ([]time.Duration, bool, runUsage) {
	k := kubelethost.Start(b, n.Endpoint, opts...)
	meter, err := startUsage(n.ContainerdPID(), n.Endpoint, k.PID())
	if err != nil {
		b.Fatal(err)
	}
	suffix := "-" + k.NodeName
	starts := newRuntimeStarts(n.RuntimeService(), func(ns, name string) string {
		return ns + "/" + strings.TrimSuffix(name, suffix)
	})
	want := 0
	for _, p := range pods {
		if measured(p.Namespace + "/" + p.Name) {
			want++
		}
	}
	write := func(p *corev1.Pod) {
		p = p.DeepCopy()
		p.UID = ""                // the kubelet derives a static pod's UID from its manifest
		p.Spec.HostNetwork = true // the node has no CNI; the agent uses the node's network too
		starts.apply(p.Namespace+"/"+p.Name, time.Now())
		if err := k.WriteStaticPod(p); err != nil {
			b.Fatal(err)
		}
	}
	remove := func(p *corev1.Pod) {
		if err := k.RemoveStaticPod(p.Name); err != nil {
			b.Fatal(err)
		}
	}
	stop := starts.watch(context.Background(), 250*time.Millisecond)
	var finished bool
	if churnSpec != nil {
		finished = runChurnLoop(pods, churnSpec, deadline, write, remove)
	} else {
		for _, p := range pods {
			write(p)
		}
		finished = waitStarted(starts, pods, measured, want, deadline)
	}
	stop()
	usage, err := meter.read()
	if err != nil {
		b.Fatal(err)
	}
	startups := starts.startups(pods, measured)
	closeKubelet(b, n, k, what)
	return startups, !finished, usage
}

// waitStarted waits until want of pods have started (starts is being
// polled meanwhile); false when the deadline passed first.
func waitStarted(starts *runtimeStarts, pods []*corev1.Pod, measured func(string) bool, want int, deadline time.Time) bool {
	for len(starts.startups(pods, measured)) < want {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// closeKubelet logs what the kubelet logged as errors, stops it and
// removes every sandbox from the node.
func closeKubelet(b testing.TB, n *testnode.Node, k *kubelethost.Kubelet, what string) {
	if entries, err := k.Log(); err == nil {
		b.Logf("kubelet, %s: %s", what, errorSummary(entries))
	}
	if err := k.Close(); err != nil {
		b.Logf("kubelet close: %v", err)
	}
	removeAllSandboxes(b, n)
}

// removeAllSandboxes stops and removes every sandbox on n's runtime, so
// the next orchestrator starts on an empty node.
func removeAllSandboxes(b testing.TB, n *testnode.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := n.RuntimeService()
	resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		b.Fatal(err)
	}
	for _, sb := range resp.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			b.Fatalf("stop sandbox %s: %v", sb.Id, err)
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			b.Fatalf("remove sandbox %s: %v", sb.Id, err)
		}
	}
}

// removeImages removes images from n's runtime, so each orchestrator
// pulls what its scenario needs itself instead of finding what the one
// before it pulled.
func removeImages(b testing.TB, n *testnode.Node, images []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, img := range images {
		if _, err := n.ImageService().RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
			b.Fatalf("remove image %s: %v", img, err)
		}
	}
}

// printStartTable renders the runs as the runtime saw them, each
// orchestrator's row beside the real kubelet's, with the ratios to the
// default and to the tuned kubelet.
func printStartTable(w io.Writer, results []startResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tmode\tpods\tmakespan\tp50\tp99\tp50 kubelet/mode\tp99 kubelet/mode\tp50 tuned/mode\tp99 tuned/mode\tp99 mode/bound\t")
	ref := map[[2]string]startResult{}
	for _, r := range results {
		ref[[2]string{r.Scenario, r.Mode}] = r
	}
	for _, r := range results {
		to := ""
		if r.TimedOut {
			to = " (timeout)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s%s\t%s\t%s\t", r.Scenario, r.Mode, r.Started, r.Pods, ms(r.Makespan), to, ms(r.P50), ms(r.P99))
		for _, refMode := range []string{"kubelet", "kubelet-tuned"} {
			k, ok := ref[[2]string{r.Scenario, refMode}]
			if !ok || r.Mode == refMode {
				fmt.Fprint(tw, "-\t-\t")
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t", speedup(k.P50, r.P50), speedup(k.P99, r.P99))
		}
		if lb, ok := ref[[2]string{r.Scenario, boundMode}]; ok && r.Mode != boundMode {
			fmt.Fprintf(tw, "%s\t", speedup(r.P99, lb.P99))
		} else {
			fmt.Fprint(tw, "-\t")
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

// errorSummary counts the kubelet's error entries by message, so a slow
// column can be told from a failing one.
func errorSummary(entries []kubelethost.LogEntry) string {
	kinds := map[string]int{}
	for _, e := range entries {
		if e.Severity == 'E' || e.Severity == 'F' {
			kind := e.Message
			if e.Err != "" {
				kind += ": " + e.Err
			}
			if len(kind) > 160 {
				kind = kind[:160] + "..."
			}
			kinds[kind]++
		}
	}
	if len(kinds) == 0 {
		return "no errors logged"
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		fmt.Fprintf(&b, "\n    %d x %s", kinds[k], k)
	}
	return fmt.Sprintf("%d kinds of error logged:%s", len(kinds), b.String())
}

// The real-node benchmark's kubelet columns and their measurement, small:
// the real kubelet at its defaults, tuned, and tuned on a containerd with
// more downloads at once, then the agent, each start three burst pods on
// one containerd; every pod's startup is read from containerd's
// timestamps, and no kubelet leaves a sandbox behind.
func TestRealNodeKubeletColumn(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "bench/a", testnode.WithSize(2<<20))
	real := &realImages{images: []string{img}, initCmd: []string{"/workload"}, initArgs: []string{"sleep", "100ms", "exit", "0"}}
	sc := burst(1, 3)
	ctx := context.Background()
	for _, col := range kubeletColumns {
		removeImages(t, n, []string{img})
		kr := runKubeletScenario(t, n, col, sc, real, 3*time.Minute)
		if kr.Mode != col.Mode || kr.TimedOut || kr.Started != 3 || kr.P99 <= 0 {
			t.Fatalf("%s: %+v, want 3 pods started with startups measured", col.Mode, kr)
		}
		left, err := n.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(left.Items) != 0 {
			t.Fatalf("%d sandboxes left after the %s run", len(left.Items), col.Mode)
		}
		t.Logf("%s: p50 %v, p99 %v", col.Mode, kr.P50, kr.P99)
	}
	removeImages(t, n, []string{img})
	rs := newRuntimeStarts(n.RuntimeService(), func(ns, name string) string { return ns + "/" + name })
	var stop func()
	rc := runConfig{endpoint: n.Endpoint, scale: 1, timeout: 3 * time.Minute, log: zap.NewNop(), real: real,
		applied: rs.apply, settled: func() { stop() }}
	stop = rs.watch(ctx, 250*time.Millisecond)
	r, err := runScenario(ctx, sc, agent.ModeSyncPod, rc)
	if err != nil {
		t.Fatal(err)
	}
	got := rs.startups(real.rewrite(sc.Pods), func(string) bool { return true })
	if r.Started != 3 || len(got) != 3 {
		t.Fatalf("syncpod: agent saw %d pods running, containerd's timestamps %d; want 3 each", r.Started, len(got))
	}
	t.Logf("syncpod p99 %v (containerd) / %v (agent)", got[2], r.P99)
}
