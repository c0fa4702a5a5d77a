package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/criproxy"
	"github.com/syncpod/syncpod/internal/procstat"
	"github.com/syncpod/syncpod/internal/testnode"
)

// footprint is what an idle agent costs, measured from outside its process.
type footprint struct {
	Pods        int
	Window      time.Duration
	BinaryBytes int64
	CPUTicks    int64          // user+system clock ticks over the window
	CPUPercent  float64        // of one core, over the window
	RSSBytes    int64          // resident set at the end of the window
	IdleCalls   int            // runtime calls over the window
	Calls       map[string]int // per method, over the window
	StartCalls  int            // runtime calls to bring the pods up
}

// measureFootprint builds the agent as a static, stripped binary, starts it
// on a real containerd holding pods pods (one container each) behind a
// call-counting proxy, waits until every container runs, lets it settle,
// and measures it over window.
func measureFootprint(t testing.TB, pods int, window time.Duration) footprint {
	n := testnode.Start(t)
	img := n.PushImage(t, "syncpod/idle", testnode.WithSize(1<<20))
	dir := t.TempDir()

	bin := filepath.Join(dir, "syncpod")
	// grpcnotrace is gRPC's own build tag leaving out golang.org/x/net/trace
	// (and html/template with it), which the agent never turns on.
	build := exec.Command("go", "build", "-tags", "grpcnotrace", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the agent: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}

	proxy, err := criproxy.Start(filepath.Join(dir, "cri.sock"), n.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i < pods; i++ {
		fmt.Fprintf(&b, "---\nmetadata: {name: idle-%d}\nspec: {containers: [{name: app, image: %q}]}\n", i, img)
	}
	if err := os.WriteFile(filepath.Join(manifests, "pods.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	logPath := filepath.Join(dir, "agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	agent := exec.Command(bin, "--manifests", manifests, "--runtime-endpoint", proxy.Endpoint(),
		"--cleanup", "--log-level", "error", "--pod-dir", t.TempDir())
	agent.Stdout, agent.Stderr = logFile, logFile
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = agent.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(3 * time.Minute):
			_ = agent.Process.Kill()
			<-exited
			t.Errorf("the agent did not stop within 3 minutes of SIGTERM")
		}
	}
	defer stop()

	ctx := context.Background()
	rt := n.RuntimeService()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		resp, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
		if err == nil && len(resp.Containers) == pods {
			break
		}
		select {
		case err := <-exited:
			exited <- err
			log, _ := os.ReadFile(logPath)
			t.Fatalf("the agent exited before its pods ran: %v\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pods not running after 5 minutes", pods)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The workers confirm each pod once more after its last start: the
	// window opens once no runtime call came for 5 s.
	for last, quiet := proxy.Total(), 0; quiet < 5; quiet++ {
		time.Sleep(time.Second)
		if n := proxy.Total(); n != last {
			last, quiet = n, -1
		}
		if time.Now().After(deadline.Add(2 * time.Minute)) {
			t.Fatalf("the agent never went quiet: %v", proxy.Counts())
		}
	}

	pid := agent.Process.Pid
	ticks0 := cpuTicks(t, pid)
	calls0 := proxy.Counts()
	start0 := proxy.Total()
	time.Sleep(window)
	ticks1 := cpuTicks(t, pid)
	calls1 := proxy.Counts()
	f := footprint{Pods: pods, Window: window, BinaryBytes: fi.Size(), CPUTicks: ticks1 - ticks0,
		RSSBytes: rss(t, pid), StartCalls: start0, Calls: map[string]int{}}
	f.CPUPercent = float64(f.CPUTicks) / procstat.ClockTicks / window.Seconds() * 100
	for m, c := range calls1 {
		if d := c - calls0[m]; d > 0 {
			f.Calls[strings.TrimPrefix(m, "/runtime.v1.")] = d
			f.IdleCalls += d
		}
	}
	stop()
	return f
}

// cpuTicks reads the CPU time pid has used, in clock ticks.
func cpuTicks(t testing.TB, pid int) int64 {
	d, err := procstat.CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	return int64(d * procstat.ClockTicks / time.Second)
}

// rss reads VmRSS of pid, in bytes.
func rss(t testing.TB, pid int) int64 {
	n, err := procstat.RSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f footprint) String() string {
	return fmt.Sprintf("%d pods idle over %v: CPU %.2f%% of a core (%d ticks), RSS %.1f MB, static binary %.1f MB, "+
		"runtime calls %d (%.1f per 10 s; %v), %d calls to start",
		f.Pods, f.Window, f.CPUPercent, f.CPUTicks, float64(f.RSSBytes)/1e6, float64(f.BinaryBytes)/1e6,
		f.IdleCalls, float64(f.IdleCalls)/f.Window.Seconds()*10, f.Calls, f.StartCalls)
}

// An agent holding 100 pods on real containerd and doing nothing makes at
// most one runtime call per 10 s and uses at most 0.3% of a core: it has
// no timer shorter than a second and no polling loop. Both are counts of
// the agent's own work (calls, CPU ticks), which the machine's load does
// not inflate. RSS and binary size are logged; BenchmarkRealNodeFootprint
// reports them over a minute.
func TestRealNodeFootprint(t *testing.T) {
	f := measureFootprint(t, 100, 30*time.Second)
	t.Log(f)
	if max := int(f.Window / (10 * time.Second)); f.IdleCalls > max {
		t.Errorf("%d runtime calls in %v of idle, want at most %d: %v", f.IdleCalls, f.Window, max, f.Calls)
	}
	if f.CPUPercent > 0.3 {
		t.Errorf("idle agent used %.2f%% of a core (%d ticks in %v), want at most 0.3%%", f.CPUPercent, f.CPUTicks, f.Window)
	}
}

// go test -run '^$' -bench RealNodeFootprint -benchtime 1x ./examples/syncpod
func BenchmarkRealNodeFootprint(b *testing.B) {
	for range b.N {
		f := measureFootprint(b, 100, time.Minute)
		b.ReportMetric(f.CPUPercent, "idle-cpu-%")
		b.ReportMetric(float64(f.RSSBytes)/1e6, "rss-MB")
		b.ReportMetric(float64(f.BinaryBytes)/1e6, "binary-MB")
		b.ReportMetric(float64(f.IdleCalls)/f.Window.Seconds()*10, "calls/10s")
		b.Log(f)
	}
}
