package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/syncpod/syncpod/internal/controlplane"
	"github.com/syncpod/syncpod/internal/kubelethost"
	"github.com/syncpod/syncpod/internal/procstat"
)

// scaleResult is what one many-nodes run measured.
type scaleResult struct {
	// Processes run NodesPerProcess virtual nodes each.
	Processes, NodesPerProcess, PodsPerNode int
	Nodes                                   int
	// Startup is each pod's time from its Create call returning to the
	// watch showing it Running and Ready: the SIG-scalability pod startup
	// latency (image present, no init containers), as a client sees it.
	Startup []time.Duration
	// Requests is the API server's request count over the burst (its
	// apiserver_request_total, every client included), ByVerb split by verb.
	Requests float64
	ByVerb   map[string]float64
	// CPU and RSS per node over the burst: the CPU its process used and
	// the process's RSS at the end, each divided by NodesPerProcess.
	CPU []time.Duration
	RSS []int64
	// Elapsed is from the first Create to the last pod Running.
	Elapsed time.Duration
}

func (r scaleResult) percentile(p float64) time.Duration {
	s := slices.Clone(r.Startup)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func mean[T int64 | time.Duration](xs []T) float64 {
	var sum float64
	for _, x := range xs {
		sum += float64(x)
	}
	return sum / float64(max(len(xs), 1))
}

func (r scaleResult) String() string {
	pods := r.Nodes * r.PodsPerNode
	return fmt.Sprintf("%d processes x %d nodes x %d pods: all running in %v; startup p50 %v p90 %v p99 %v; "+
		"API requests %.0f (%.1f per pod; %v); per node CPU %.2fs RSS %.1f MB",
		r.Processes, r.NodesPerProcess, r.PodsPerNode, r.Elapsed.Round(10*time.Millisecond),
		r.percentile(0.5).Round(time.Millisecond), r.percentile(0.9).Round(time.Millisecond), r.percentile(0.99).Round(time.Millisecond),
		r.Requests, r.Requests/float64(pods), r.ByVerb,
		mean(r.CPU)/float64(time.Second), mean(r.RSS)/(1<<20))
}

// apiRequests reads apiserver_request_total from the API server's /metrics,
// in total and by verb.
func apiRequests(ctx context.Context, kube kubernetes.Interface) (float64, map[string]float64, error) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, nil, err
	}
	samples, err := kubelethost.ParseText(string(raw))
	if err != nil {
		return 0, nil, err
	}
	byVerb := map[string]float64{}
	var total float64
	for _, s := range samples {
		if s.Name == "apiserver_request_total" {
			total += s.Value
			byVerb[s.Labels["verb"]] += s.Value
		}
	}
	return total, byVerb, nil
}

// runScale starts a control plane and nodes syncpod-vk processes (each on
// its own embedded simulated runtime, as kubemark's hollow nodes run on
// fakes; the processes are this test binary running the command, so
// under -race their CPU and memory include the race detector's), creates podsPerNode pods bound to each node, and measures until
// every pod is Running and Ready.
func runScale(t testing.TB, processes, nodesPerProcess, podsPerNode int) scaleResult {
	nodes := processes * nodesPerProcess
	cp := controlplane.Start(t, controlplane.WithAPIServerFlags("--max-requests-inflight=800", "--max-mutating-requests-inflight=400"))
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, cp.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, err := os.Executable() // the test binary runs the command (envRunNode)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubeClient(t, cp)
	ctx := context.Background()

	var procs []*exec.Cmd
	var wg sync.WaitGroup
	t.Cleanup(func() { // before the control plane goes
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		wg.Wait()
	})
	var names []string
	for i := range processes {
		prefix := fmt.Sprintf("hollow-%02d", i)
		for j := range nodesPerProcess {
			names = append(names, fmt.Sprintf("%s-%02d", prefix, j))
		}
		logf, err := os.Create(filepath.Join(dir, prefix+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-kubeconfig", kubeconfig, "-nodename", prefix, "-nodes", strconv.Itoa(nodesPerProcess),
			"-taint=false", "-node-ip", "127.0.0.1",
			"-kubelet-api-address=") // hollow nodes serve no kubelet API (one process per node would all want :10250)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Env = append(os.Environ(), envRunNode+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close()
		procs = append(procs, cmd)
		wg.Go(func() { _ = cmd.Wait() })
	}
	eventually(t, "every node Ready", func() string {
		list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		ready := 0
		for i := range list.Items {
			if nodeReady(&list.Items[i]) {
				ready++
			}
		}
		if ready != nodes {
			return fmt.Sprintf("%d of %d nodes Ready", ready, nodes)
		}
		return ""
	})

	r := scaleResult{Processes: processes, NodesPerProcess: nodesPerProcess, Nodes: nodes, PodsPerNode: podsPerNode}
	cpu0 := make([]time.Duration, processes)
	for i, p := range procs {
		var err error
		if cpu0[i], err = procstat.CPU(p.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	req0, verb0, err := apiRequests(ctx, kube)
	if err != nil {
		t.Fatal(err)
	}

	// One plain watch is not enough at this scale: the API server's watch
	// cache closes a watcher that falls behind a burst of 1000 pods, and
	// the count would stop there. The retry watcher resumes from the last
	// resource version seen, so no transition is lost.
	initial, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, initial.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().Pods("default").Watch(ctx, o)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	running := map[string]time.Time{}
	var watchErr string
	total := nodes * podsPerNode
	allRunning := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error { // the retry watcher gives up (410 Gone)
				mu.Lock()
				watchErr = fmt.Sprintf("%v", ev.Object)
				mu.Unlock()
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || p.Status.Phase != corev1.PodRunning || podCondition(p, corev1.PodReady) != corev1.ConditionTrue {
				continue
			}
			mu.Lock()
			if _, seen := running[p.Name]; !seen {
				running[p.Name] = time.Now()
				if len(running) == total {
					close(allRunning)
				}
			}
			mu.Unlock()
		}
	}()

	start := time.Now()
	var cg sync.WaitGroup
	sem := make(chan struct{}, 20)
	var createErr error
	for i := range total {
		cg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("pod-%04d", i)},
				Spec: corev1.PodSpec{NodeName: names[i%nodes], HostNetwork: true,
					Containers: []corev1.Container{{Name: "app", Image: "docker.io/library/busybox:1.36"}}},
			}
			_, err := kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil && createErr == nil {
				createErr = err
			}
			created[p.Name] = time.Now()
		})
	}
	cg.Wait()
	if createErr != nil {
		t.Fatal(createErr)
	}
	select {
	case <-allRunning:
	case <-time.After(10 * time.Minute):
		mu.Lock()
		n := len(running)
		werr := watchErr
		mu.Unlock()
		t.Fatalf("%d of %d pods Running and Ready after 10 minutes (watch error: %q); not running: %s", n, total, werr, notRunning(ctx, kube))
	}
	w.Stop()
	<-watchDone
	<-w.Done()
	r.Elapsed = time.Since(start)
	for name, at := range running {
		// A pod can be seen running before its Create call has returned.
		r.Startup = append(r.Startup, max(0, at.Sub(created[name])))
	}
	req1, verb1, err := apiRequests(ctx, kube)
	if err != nil {
		t.Fatal(err)
	}
	r.Requests, r.ByVerb = req1-req0, map[string]float64{}
	for v, n := range verb1 {
		if d := n - verb0[v]; d > 0 {
			r.ByVerb[v] = d
		}
	}
	for i, p := range procs {
		c, err := procstat.CPU(p.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		m, err := procstat.RSS(p.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		for range nodesPerProcess {
			r.CPU = append(r.CPU, (c-cpu0[i])/time.Duration(nodesPerProcess))
			r.RSS = append(r.RSS, m/int64(nodesPerProcess))
		}
	}
	return r
}

// notRunning sums up, per node and phase, the pods not Running and Ready,
// with one example each.
func notRunning(ctx context.Context, kube kubernetes.Interface) string {
	list, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	counts := map[string]int{}
	example := map[string]string{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == corev1.ConditionTrue {
			continue
		}
		k := p.Spec.NodeName + "/" + string(p.Status.Phase)
		counts[k]++
		if _, ok := example[k]; !ok {
			example[k] = fmt.Sprintf("%s %v %v", p.Name, p.Status.Conditions, p.Status.ContainerStatuses)
		}
	}
	if len(counts) == 0 {
		return fmt.Sprintf("none: the API server lists all %d pods Running and Ready", len(list.Items))
	}
	var b strings.Builder
	for k, n := range counts {
		fmt.Fprintf(&b, "\n  %s: %d (e.g. %s)", k, n, example[k])
	}
	return b.String()
}

// Two syncpod-vk processes of two virtual nodes each on one real control
// plane: every node registers Ready, every pod bound to one runs, none is
// lost.
func TestRealNodeManyVirtualNodes(t *testing.T) {
	r := runScale(t, 2, 2, 8)
	if len(r.Startup) != 32 {
		t.Fatalf("%d pods measured, want 32", len(r.Startup))
	}
	if r.Requests <= 0 {
		t.Fatalf("the API server counted %v requests", r.Requests)
	}
	t.Log(r)
}

// The benchmark's shape: 20 nodes x 50 pods in one process unless
// SYNCPOD_VK_NODES, SYNCPOD_VK_PODS_PER_NODE and SYNCPOD_VK_PROCESSES (the
// nodes are split evenly among them) say otherwise.
var (
	benchNodes       = envInt("SYNCPOD_VK_NODES", 20)
	benchPodsPerNode = envInt("SYNCPOD_VK_PODS_PER_NODE", 50)
	benchProcesses   = envInt("SYNCPOD_VK_PROCESSES", 1)
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkRealNodeManyVirtualNodes: 20 nodes x 50 pods on one real
// control plane, the SIG-scalability density shape, its nodes run by one
// process as kubemark's hollow nodes are.
//
//	cd examples/virtualkubelet && SYNCPOD_REALNODE=require go test -run '^$' -bench RealNodeManyVirtualNodes -benchtime 1x ./cmd/syncpod-vk
func BenchmarkRealNodeManyVirtualNodes(b *testing.B) {
	if benchNodes%benchProcesses != 0 {
		b.Fatalf("SYNCPOD_VK_NODES=%d is not a multiple of SYNCPOD_VK_PROCESSES=%d", benchNodes, benchProcesses)
	}
	for b.Loop() {
		r := runScale(b, benchProcesses, benchNodes/benchProcesses, benchPodsPerNode)
		b.ReportMetric(float64(r.percentile(0.5).Milliseconds()), "p50-ms")
		b.ReportMetric(float64(r.percentile(0.99).Milliseconds()), "p99-ms")
		b.ReportMetric(r.Requests/float64(r.Nodes*r.PodsPerNode), "api-requests/pod")
		b.ReportMetric(mean(r.CPU)/float64(time.Second), "cpu-s/node")
		b.ReportMetric(mean(r.RSS)/(1<<20), "rss-MB/node")
		b.Log(r)
	}
}
