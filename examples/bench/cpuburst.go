package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/concurrentstart/admission"
	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/criclient/podcri"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

// The cpu-burst scenario: 50 pods x 3 containers, image present, on a
// runtime whose starts are CPU-bound (crisim's CPU model with 2 cores, or
// a real containerd), run five ways in one process:
//
//	kubelet      a real kubelet's static pods (real-node benchmark only; measured
//	             from containerd's container start times); kubelet-tuned the
//	             same kubelet tuned for a burst
//	serial       one pod after another, one container after another (a kubelet-like ideal of no overlap)
//	all-at-once  every pod at once, each pod's containers at once
//	baseline     the agent in baseline mode
//	unbounded    the agent in syncpod mode without start admission
//	syncpod      the agent in syncpod mode with its start admission
//
// For each it reports the makespan, pod startup p50 and p99, and the
// latency of an independent client's ListPodSandbox + ListContainers every
// 100 ms during the run: what a kubelet relisting on the same node sees.
var cpuBurstModes = []string{"serial", "all-at-once", "baseline", "unbounded", "syncpod"}

// CPUResult is one cpu-burst run.
type CPUResult struct {
	Mode               string
	Pods, Started      int
	Makespan, P50, P99 time.Duration
	// The same by the runtime's clock: from the moment the run began to
	// the StartedAt the runtime reports for a pod's last container, read
	// once the run is over. Every mode is measured alike this way, where
	// the figures above are the raw calls' returns for serial and
	// all-at-once and the agent's observation of its pods for the others.
	RuntimeMakespan, RuntimeP50, RuntimeP99 time.Duration
	RelistP50, RelistP99                    time.Duration
	Relists                                 int
	AdmissionBound                          int // the start admission's bound when the run ended (syncpod mode)
	// Idle core time in the first tenth of the makespan, the middle eight
	// tenths and the last tenth: where a mode left the cores unused. On a
	// real node, from /proc/stat, so the node's every process counts.
	IdleStart, IdleBody, IdleTail time.Duration
	// Core time spent up to the makespan: by the calls, on crisim; by the
	// whole node (runc, shims, containerd, the agent, the workloads), on a
	// real one. For the same pods, more of it is the cost of running too
	// much at once.
	CPUSpent time.Duration
	// Core time this process spent on the run: the orchestrator (the
	// agent, or the raw calls) and the relist probe, and on crisim the
	// simulated runtime too, which the simulated CPU does not charge.
	ProcessCPU time.Duration
	Order      []string // pod names in the order they came up
	TimedOut   bool
}

const cpuBurstPods = 50

// cpuBurstImage is the cpu-burst pods' image (a real run rewrites it).
const cpuBurstImage = "registry.sim/cpu:1"

// cpuBurstCores is the simulated node's cores.
const cpuBurstCores = 2

func cpuBurstPodsFor(image string, n int) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := 0; i < n; i++ {
		p := scenario.Pod(scenario.PodOptions{
			Name: fmt.Sprintf("cpu-%02d", i), Containers: []string{image, image, image},
		})
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		if p.UID == "" {
			p.UID = types.UID("uid-" + p.Name)
		}
		pods = append(pods, p)
	}
	return pods
}

// cpuBurstRuntime is the simulated node of the scenario: realistic
// latencies, no pulls (the image is present), two cores.
func cpuBurstRuntime(scale float64, image string) []crisim.Option {
	rt := scenario.DefaultRuntime(scale)
	// The CPU model stands for the store lock here: in a CPU-bound burst on
	// containerd a relist is slow because it shares the cores with runc
	// (real-node relist p50 26 ms with every pod starting at once), not
	// because it waits for every RunPodSandbox in flight, as the store lock
	// would make it do.
	rt.StoreLock = false
	// Nor is there a cap on calls worked on at once: with the other
	// scenarios' 16 every pod started at once kept an independent List waiting
	// for a slot for seconds (p99 3 s, 5 Lists done in a 4.5 s run) and
	// half the pods came up well before the end (p50 0.7 of the
	// makespan), where on real containerd a List during that burst takes
	// about 30 ms (p99 0.3-0.6 s) and almost every pod comes up at the
	// very end.
	rt.MaxConcurrency = 0
	opts := rt.Options()
	work := map[string]time.Duration{}
	for m, d := range crisim.DefaultCPUWork {
		work[m] = scaleDur(d, scale)
	}
	return append(opts, crisim.WithImage(image, 10<<20), crisim.WithCPU(cpuBurstCores, work))
}

// runCPUBurst runs every mode on a fresh runtime each (the simulated one,
// or endpoint with pods rewritten by real).
func runCPUBurst(ctx context.Context, rc runConfig, modes []string, n int) ([]CPUResult, error) {
	var out []CPUResult
	for _, mode := range modes {
		endpoint := rc.endpoint
		image := cpuBurstImage
		var srv *crisim.Server
		if endpoint == "" {
			var err error
			if srv, err = crisim.Start(cpuBurstRuntime(rc.scale, image)...); err != nil {
				return nil, err
			}
			endpoint = srv.Endpoint()
		}
		pods := cpuBurstPodsFor(image, n)
		if rc.real != nil {
			pods = rc.real.rewrite(pods)
		}
		var cpu func() time.Duration
		if srv != nil {
			cpu = srv.Runtime().CPUTime
		}
		r, err := runCPUBurstMode(ctx, rc, endpoint, mode, pods, cpu)
		if srv != nil {
			_ = srv.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("cpu-burst %s: %w", mode, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// cpuSample is the node's CPU by a moment of a run: the core time spent
// and the core time elapsed (the cores times the wall time).
type cpuSample struct {
	at           time.Duration // since the run began
	spent, total time.Duration
}

// idleCores is the core time the cores stood idle in [from, to), from the
// samples nearest those moments.
func idleCores(samples []cpuSample, from, to time.Duration) time.Duration {
	a, b := nearest(samples, from), nearest(samples, to)
	return max(0, (b.total-a.total)-(b.spent-a.spent))
}

// cpuSpent is the core time spent from the run's start to the sample
// nearest at.
func cpuSpent(samples []cpuSample, at time.Duration) time.Duration {
	return nearest(samples, at).spent - samples[0].spent
}

// nearest is the first sample at or after at, or the last one.
func nearest(samples []cpuSample, at time.Duration) cpuSample {
	i := sort.Search(len(samples), func(i int) bool { return samples[i].at >= at })
	return samples[min(i, len(samples)-1)]
}

// runCPUBurstMode runs one mode; cpu, when set, reads the simulated CPU's
// core time spent so far, for the CPU figures and the syncpod mode's
// admission; without it both read the node's /proc/stat.
func runCPUBurstMode(ctx context.Context, rc runConfig, endpoint, mode string, pods []*corev1.Pod, cpu func() time.Duration) (CPUResult, error) {
	res := CPUResult{Mode: mode, Pods: len(pods)}
	client, err := criclient.Dial(ctx, endpoint, criclient.WithLogger(rc.log))
	if err != nil {
		return res, err
	}
	defer client.Close()
	probe, err := criclient.Dial(ctx, endpoint)
	if err != nil {
		return res, err
	}
	defer probe.Close()

	// Leftovers of an interrupted run would distort the runtime's load.
	cleaner, err := agent.New(client.CRI(), client.CRI(), agent.WithMode(agent.ModeBaseline))
	if err != nil {
		return res, err
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = cleaner.Cleanup(cctx)
	cancel()
	if err != nil {
		return res, fmt.Errorf("pods of an earlier run: %w", err)
	}

	external := isKubeletMode(mode)
	if external && rc.external == nil {
		return res, fmt.Errorf("mode %s needs a kubelet to run the pods", mode)
	}
	probeStop := make(chan struct{})
	var probeWG sync.WaitGroup
	var relists []time.Duration
	var cpuSamples []cpuSample
	nodeCPU := admission.NodeCPU
	if cpu != nil {
		nodeCPU = simulatedCPU(cpu)
	}
	if read, err := nodeCPU(); err == nil {
		probeWG.Add(1)
		go func() {
			defer probeWG.Done()
			t0 := time.Now()
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for {
				if spent, total, err := read(); err == nil {
					cpuSamples = append(cpuSamples, cpuSample{at: time.Since(t0), spent: spent, total: total})
				}
				select {
				case <-probeStop:
					return
				case <-t.C:
				}
			}
		}()
	}
	probeWG.Add(1)
	go func() {
		defer probeWG.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-probeStop:
				return
			case <-t.C:
			}
			t0 := time.Now()
			_, err1 := probe.ListPodSandbox(ctx, nil)
			_, err2 := probe.ListContainers(ctx, nil)
			if err1 == nil && err2 == nil {
				relists = append(relists, time.Since(t0))
			}
		}
	}()

	deadline := time.Now().Add(rc.timeout)
	var startups []time.Duration
	cpu0, cpuErr := processCPU()
	t0 := time.Now()
	switch {
	case external:
		startups, res.TimedOut, err = rc.external(ctx, mode, pods, deadline)
	case mode == "serial" || mode == "all-at-once":
		startups, res.Order, res.TimedOut = runRaw(ctx, client, pods, mode == "serial", deadline, rc.log)
	default:
		startups, res.Order, res.TimedOut, res.AdmissionBound, err = runAgent(ctx, client, pods, mode, rc, deadline, nodeCPU)
	}
	close(probeStop)
	probeWG.Wait()
	if err != nil {
		return res, err
	}
	if cpu1, err := processCPU(); err == nil && cpuErr == nil {
		res.ProcessCPU = cpu1 - cpu0
	}
	byRuntime := startups // the kubelet modes' are read from the runtime already
	if !external {
		if byRuntime, err = startedByRuntime(ctx, client, pods, t0); err != nil {
			return res, err
		}
	}
	cctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	if err := cleaner.Cleanup(cctx); err != nil {
		rc.log.Warn("cleanup", zap.Error(err))
	}
	cancel()

	sort.Slice(startups, func(i, j int) bool { return startups[i] < startups[j] })
	res.Started = len(startups)
	if n := len(startups); n > 0 {
		res.Makespan = startups[n-1]
	}
	res.P50, res.P99 = percentile(startups, 50), percentile(startups, 99)
	if n := len(byRuntime); n > 0 {
		res.RuntimeMakespan = byRuntime[n-1]
		res.RuntimeP50, res.RuntimeP99 = percentile(byRuntime, 50), percentile(byRuntime, 99)
	}
	if len(cpuSamples) > 0 && res.Makespan > 0 {
		m := res.Makespan
		res.IdleStart = idleCores(cpuSamples, 0, m/10)
		res.IdleBody = idleCores(cpuSamples, m/10, m*9/10)
		res.IdleTail = idleCores(cpuSamples, m*9/10, m)
		res.CPUSpent = cpuSpent(cpuSamples, m)
	}
	sort.Slice(relists, func(i, j int) bool { return relists[i] < relists[j] })
	res.Relists = len(relists)
	res.RelistP50, res.RelistP99 = percentile(relists, 50), percentile(relists, 99)
	return res, nil
}

// startedByRuntime is, for each of pods whose containers have all
// started, the time from t0 to its last container's StartedAt as the
// runtime reports it, sorted.
func startedByRuntime(ctx context.Context, client *criclient.Client, pods []*corev1.Pod, t0 time.Time) ([]time.Duration, error) {
	rt, _ := client.Raw()
	rs := newRuntimeStarts(rt, func(ns, name string) string { return ns + "/" + name })
	for _, p := range pods {
		rs.apply(p.Namespace+"/"+p.Name, t0)
	}
	if err := rs.poll(ctx); err != nil {
		return nil, fmt.Errorf("start times: %w", err)
	}
	return rs.startups(pods, func(string) bool { return true }), nil
}

// runRaw starts the pods with direct CRI calls and returns each pod's
// startup (t0 to its last StartContainer), and their names in the order
// they came up.
func runRaw(ctx context.Context, rt *criclient.Client, pods []*corev1.Pod, serial bool, deadline time.Time, log *zap.Logger) ([]time.Duration, []string, bool) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	t0 := time.Now()
	startPod := func(pod *corev1.Pod) (time.Duration, error) {
		sbc, err := rawSandboxConfig(pod)
		if err != nil {
			return 0, err
		}
		sb, err := rt.RunPodSandbox(ctx, sbc, "")
		if err != nil {
			return 0, err
		}
		startOne := func(c *corev1.Container) error {
			cfg, err := rawContainerConfig(pod, c)
			if err != nil {
				return err
			}
			id, err := rt.CreateContainer(ctx, sb, cfg, sbc)
			if err != nil {
				return err
			}
			return rt.StartContainer(ctx, id)
		}
		if serial {
			for i := range pod.Spec.Containers {
				if err := startOne(&pod.Spec.Containers[i]); err != nil {
					return 0, err
				}
			}
			return time.Since(t0), nil
		}
		errs := make(chan error, len(pod.Spec.Containers))
		for i := range pod.Spec.Containers {
			go func() { errs <- startOne(&pod.Spec.Containers[i]) }()
		}
		var first error
		for range pod.Spec.Containers {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return time.Since(t0), first
	}
	var mu sync.Mutex
	var out []time.Duration
	var order []string
	record := func(pod *corev1.Pod, d time.Duration, err error) {
		if err != nil {
			log.Warn("raw start", zap.String("pod", pod.Name), zap.Error(err))
			return
		}
		mu.Lock()
		out = append(out, d)
		order = append(order, pod.Name)
		mu.Unlock()
	}
	if serial {
		for _, p := range pods {
			d, err := startPod(p)
			record(p, d, err)
		}
	} else {
		var wg sync.WaitGroup
		for _, p := range pods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := startPod(p)
				record(p, d, err)
			}()
		}
		wg.Wait()
	}
	return out, order, len(out) < len(pods)
}

// simulatedCPU reads the simulated node's CPU for the start admission, as
// NodeCPU reads a real node's: spent is its core time spent so far.
func simulatedCPU(spent func() time.Duration) func() (admission.CPUReader, error) {
	return func() (admission.CPUReader, error) {
		t0 := time.Now()
		return func() (time.Duration, time.Duration, error) {
			return spent(), cpuBurstCores * time.Since(t0), nil
		}, nil
	}
}

// runAgent runs the pods through the agent and returns each pod's startup
// as the agent measures it (creation to all containers running, observed),
// and the pods' names in the order they came up; nodeCPU gives the syncpod
// mode's admission the node's CPU time.
func runAgent(ctx context.Context, client *criclient.Client, pods []*corev1.Pod, mode string, rc runConfig, deadline time.Time, nodeCPU func() (admission.CPUReader, error)) ([]time.Duration, []string, bool, int, error) {
	m := agent.ModeSyncPod
	opts := []agent.Option{agent.WithTuning(agent.Tuning{TimeScale: rc.scale}), agent.WithLogger(rc.log)}
	var ctl *admission.Controller
	spec := rc.admission
	if base, own, ok := strings.Cut(mode, "@"); ok && base == "syncpod" {
		mode, spec = base, own // syncpod@fixed=6: this run's own admission
	}
	switch mode {
	case "baseline":
		m = agent.ModeBaseline
	case "unbounded":
		opts = append(opts, agent.WithTuning(agent.Tuning{NoStartAdmission: true}))
	case "syncpod":
		cpu, err := nodeCPU()
		if err != nil {
			return nil, nil, false, 0, err
		}
		lim, err := parseAdmission(spec, cpu)
		if err != nil {
			return nil, nil, false, 0, err
		}
		if ctl, err = admission.New(admission.WithLimiter(lim)); err != nil {
			return nil, nil, false, 0, err
		}
		defer ctl.Close()
		opts = append(opts, agent.WithTuning(agent.Tuning{StartAdmission: ctl}))
	default:
		return nil, nil, false, 0, fmt.Errorf("unknown mode %q (want one of %v)", mode, cpuBurstModes)
	}
	var mu sync.Mutex
	var startups []time.Duration
	var order []string
	done := make(chan struct{})
	opts = append(opts, agent.WithMode(m), agent.WithEventHook(func(e agent.Event) {
		if e.Type != "PodRunning" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		startups = append(startups, e.Duration)
		order = append(order, e.Pod[strings.IndexByte(e.Pod, '/')+1:])
		if len(startups) == len(pods) {
			close(done)
		}
	}))
	a, err := agent.New(client.CRI(), client.CRI(), opts...)
	if err != nil {
		return nil, nil, false, 0, err
	}
	if err := a.Start(); err != nil {
		return nil, nil, false, 0, err
	}
	for _, p := range pods {
		a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: p, Source: "bench"})
	}
	if ctl != nil && rc.traceAdmission {
		// The admission's bound over time, for tuning; ends with the run.
		stop := make(chan struct{})
		defer close(stop)
		t0 := time.Now()
		go func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				st := ctl.Stats()
				rc.log.Info("admission", zap.Duration("at", time.Since(t0)), zap.Int("limit", st.Limit), zap.Int("held", st.Held), zap.Int("queued", st.Queued))
			}
		}()
	}
	timedOut := false
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
		timedOut = true
	case <-ctx.Done():
		timedOut = true
	}
	a.Stop()
	limit := 0
	if ctl != nil {
		limit = ctl.Stats().Limit
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]time.Duration(nil), startups...), append([]string(nil), order...), timedOut, limit, nil
}

// printCPUTable prints every run, then each run's ratios to the
// all-at-once runs around it (allAtOnceAround), so that a mode list that
// alternates ("all-at-once,syncpod,all-at-once,syncpod,all-at-once") gives
// one side-by-side ratio per run.
func printCPUTable(w io.Writer, results []CPUResult, where string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	withCPU := false // the CPU columns: some run had a CPU reading
	for _, r := range results {
		withCPU = withCPU || r.CPUSpent > 0
	}
	head := "cpu-burst mode\tpods\tmakespan\tp50\tp99\tby the runtime: makespan\tp50\tp99\trelist p50\trelist p99\tadmission bound at end\t"
	if withCPU {
		head += "core-ms spent\tidle: first 10%\tmiddle\tlast 10%\tthis process core-ms\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range results {
		to := ""
		if r.TimedOut {
			to = " (timeout)"
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t", r.Mode, r.Started, r.Pods, ms(r.Makespan), to,
			ms(r.P50), ms(r.P99), ms(r.RuntimeMakespan), ms(r.RuntimeP50), ms(r.RuntimeP99), ms(r.RelistP50), ms(r.RelistP99), r.AdmissionBound)
		if withCPU {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t", r.CPUSpent.Milliseconds(), r.IdleStart.Milliseconds(), r.IdleBody.Milliseconds(), r.IdleTail.Milliseconds(), r.ProcessCPU.Milliseconds())
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%s\n", where)
	for i, r := range results {
		if r.Mode == "all-at-once" || r.Makespan == 0 {
			continue
		}
		all, around := allAtOnceAround(results, i)
		if around == "" {
			continue
		}
		fmt.Fprintf(w, "%s vs all-at-once (%s): makespan %.2fx (aim <= 1.05), p50/all-at-once makespan %.2f (aim <= 0.6), p99 %.2fx, relist p99 %.2fx (aim <= 0.2); by the runtime: makespan %.2fx, p50 %.2f, p99 %.2fx\n",
			r.Mode, around, ratio(r.Makespan, all.Makespan), ratio(r.P50, all.Makespan),
			ratio(r.P99, all.P99), ratio(r.RelistP99, all.RelistP99),
			ratio(r.RuntimeMakespan, all.RuntimeMakespan), ratio(r.RuntimeP50, all.RuntimeMakespan), ratio(r.RuntimeP99, all.RuntimeP99))
	}
}

// allAtOnceAround is what run i is compared with: the mean makespan, p99
// and relist p99 (and makespan and p99 by the runtime) of the nearest
// all-at-once runs before and after it, so that a node drifting over a
// long run (these shared machines do, by 15% and more) weighs on both
// sides alike; where only one side has one, that run alone. around says which ("before and after", "before", "after"),
// empty where no all-at-once run finished.
func allAtOnceAround(results []CPUResult, i int) (all CPUResult, around string) {
	var near []CPUResult
	var sides []string
	for _, dir := range []struct {
		step int
		name string
	}{{-1, "before"}, {1, "after"}} {
		for j := i + dir.step; j >= 0 && j < len(results); j += dir.step {
			if r := results[j]; r.Mode == "all-at-once" && r.Makespan > 0 {
				near, sides = append(near, r), append(sides, dir.name)
				break
			}
		}
	}
	if len(near) == 0 {
		return all, ""
	}
	n := time.Duration(len(near))
	for _, r := range near {
		all.Makespan += r.Makespan / n
		all.P99 += r.P99 / n
		all.RelistP99 += r.RelistP99 / n
		all.RuntimeMakespan += r.RuntimeMakespan / n
		all.RuntimeP99 += r.RuntimeP99 / n
	}
	return all, strings.Join(sides, " and ")
}

// ratio is a / b, or 0 where nothing was measured for b.
// isKubeletMode reports whether mode is run by a real kubelet outside
// this process ("kubelet", "kubelet-tuned", ...).
func isKubeletMode(mode string) bool {
	return mode == "kubelet" || strings.HasPrefix(mode, "kubelet-")
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// parseAdmission turns the syncpod mode's admission setting into its
// limiter, so that a variant is measured with the same command as the
// default: "" is the default AIMD reading cpu; "fixed=N" a constant
// bound; initial=, min=, max=, backoff=, tolerance= and saturated=,
// separated by commas or pluses, set the AIMD's fields
// ("initial=4,tolerance=2"), and cpu=0 leaves the CPU out (latency
// alone). In a mode list, "syncpod@SETTING" ("syncpod@fixed=6") runs with
// its own setting, so that variants are measured side by side in one run.
func parseAdmission(spec string, cpu admission.CPUReader) (admission.Limiter, error) {
	cfg := admission.AIMDConfig{CPU: cpu}
	if spec == "" {
		return admission.NewAIMD(cfg)
	}
	for _, kv := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == '+' }) {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("admission setting %q: want key=number", kv)
		}
		switch k {
		case "fixed":
			if f < 1 || f != float64(int(f)) {
				return nil, fmt.Errorf("admission setting %q: want a whole bound of at least 1", kv)
			}
			return admission.Fixed(int(f)), nil
		case "initial":
			cfg.Initial = int(f)
		case "min":
			cfg.Min = int(f)
		case "max":
			cfg.Max = int(f)
		case "backoff":
			cfg.Backoff = f
		case "tolerance":
			cfg.Tolerance = f
		case "saturated":
			cfg.SaturatedAt = f
		case "cpu":
			if f == 0 {
				cfg.CPU = nil // latency alone
			}
		default:
			return nil, fmt.Errorf("admission setting %q: unknown key %q (want fixed, initial, min, max, backoff, tolerance, saturated or cpu)", kv, k)
		}
	}
	return admission.NewAIMD(cfg)
}

// processCPU returns the core time this process has spent, user and
// system, from getrusage: the example reads it itself rather than through
// the library's internal packages, so it builds wherever it is copied.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// rawSandboxConfig and rawContainerConfig are the configs of the raw
// modes' direct CRI calls: the library's conversion on the node's network,
// labelled as the agent labels what it makes, so that the agent's cleanup
// removes them, with the pod's per-container annotations
// ("<key>.<container>") that the simulated runtime reads.
func rawSandboxConfig(pod *corev1.Pod) (*runtimeapi.PodSandboxConfig, error) {
	cfg, err := podcri.SandboxConfig(pod, podcri.WithNodeNetwork())
	if err != nil {
		return nil, err
	}
	cfg.Labels[managedLabel] = "true"
	return cfg, nil
}

func rawContainerConfig(pod *corev1.Pod, c *corev1.Container) (*runtimeapi.ContainerConfig, error) {
	ns := podcri.NamespaceOptions(pod)
	ns.Network = runtimeapi.NamespaceMode_NODE
	cfg, err := podcri.ContainerConfig(pod, c, podcri.WithNamespaceOptions(ns))
	if err != nil {
		return nil, err
	}
	cfg.LogPath = ""
	for k, v := range pod.Annotations {
		if key, ok := strings.CutSuffix(k, "."+c.Name); ok {
			cfg.Annotations[key] = v
		}
	}
	cfg.Labels[managedLabel] = "true"
	return cfg, nil
}

// managedLabel marks what the agent made, and what its cleanup removes.
const managedLabel = "syncpod.io/managed"
