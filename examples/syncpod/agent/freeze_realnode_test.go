package agent_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/internal/testnode"
)

// agentFreeze is one stalled-runtime scenario for the agent: pods running,
// containerd frozen, pods added during the freeze.
type agentFreeze struct {
	running int
	freeze  time.Duration
	created int
}

// healthChange is a value of Healthy() at a time since the freeze began.
type healthChange struct {
	at  time.Duration
	err string // "" while healthy
}

// agentFreezeReport is what the agent said and did through one freeze.
type agentFreezeReport struct {
	mode      agent.Mode
	changes   []healthChange
	toRunning time.Duration // from the thaw until the pods added during the freeze ran
	toHealthy time.Duration // from the thaw until Healthy() was nil again
	stats     agent.Stats
	lost      []string
	trace     []string // the agent's events for the pods added during the freeze, from T
}

func (r agentFreezeReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agent-%-8s pods added during the freeze ran %v after the thaw; healthy %v after it; longest relist %v; PLEG unhealthy %v; pleg relists %d (%d failed), stream connects %d errors %d, runtime events %d\n",
		r.mode, r.toRunning.Round(100*time.Millisecond), r.toHealthy.Round(100*time.Millisecond), r.stats.MaxRelist.Round(time.Millisecond),
		r.stats.PLEGUnhealthy, r.stats.PLEG.Relists, r.stats.PLEG.RelistFailures, r.stats.PLEG.StreamConnects, r.stats.PLEG.StreamErrors, r.stats.PLEG.RuntimeEvents)
	for _, c := range r.changes {
		v := "healthy"
		if c.err != "" {
			v = "unhealthy: " + c.err
		}
		fmt.Fprintf(&b, "agent-%-8s   Healthy() at T%+.1fs: %s\n", r.mode, c.at.Seconds(), v)
	}
	for _, l := range r.trace {
		fmt.Fprintf(&b, "agent-%-8s   %s\n", r.mode, l)
	}
	if len(r.lost) > 0 {
		fmt.Fprintf(&b, "agent-%-8s   LOST: %s\n", r.mode, strings.Join(r.lost, "; "))
	}
	return b.String()
}

// healthWatch samples Healthy() every 250 ms and keeps every change.
type healthWatch struct {
	mu      sync.Mutex
	changes []healthChange
	t0      time.Time
	stop    context.CancelFunc
	done    chan struct{}
}

func watchHealth(a *agent.Agent) *healthWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &healthWatch{t0: time.Now(), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		last := "-"
		for {
			v := ""
			if err := a.Healthy(); err != nil {
				v = err.Error()
			}
			// One change per cause: the age in the message changes on
			// every sample.
			if cause(v) != cause(last) {
				w.mu.Lock()
				w.changes = append(w.changes, healthChange{at: time.Since(w.t0), err: v})
				w.mu.Unlock()
				last = v
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// cause is the message without its figures.
func cause(msg string) string {
	if i := strings.Index(msg, ":"); i >= 0 {
		if j := strings.Index(msg[i+1:], ":"); j >= 0 {
			return msg[:i+1+j]
		}
	}
	return msg
}

func (w *healthWatch) seen() []healthChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]healthChange(nil), w.changes...)
}

func (w *healthWatch) end(t0 time.Time) []healthChange {
	w.stop()
	<-w.done
	out := w.seen()
	for i := range out {
		out[i].at -= t0.Sub(w.t0)
	}
	return out
}

func freezePod(name, img string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: img, Args: []string{"pause"}}},
			RestartPolicy: corev1.RestartPolicyAlways},
	}
}

// tracingRuntime notes the sandbox and container creations of the traced
// pods, as events named after the call, at the call's end.
type tracingRuntime struct {
	cri.RuntimeService
	traced map[string]bool
	note   func(agent.Event)
}

func (r *tracingRuntime) call(pod *runtimeapi.PodSandboxMetadata, what string, begin time.Time, err error) {
	key := pod.GetNamespace() + "/" + pod.GetName()
	if r.traced[key] {
		r.note(agent.Event{Time: time.Now(), Type: "CRI " + what, Pod: key, Attempt: pod.GetAttempt(), Duration: time.Since(begin), Err: err})
	}
}

func (r *tracingRuntime) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	begin := time.Now()
	id, err := r.RuntimeService.RunPodSandbox(ctx, cfg, handler)
	r.call(cfg.GetMetadata(), "RunPodSandbox", begin, err)
	return id, err
}

func (r *tracingRuntime) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	begin := time.Now()
	id, err := r.RuntimeService.CreateContainer(ctx, sb, cfg, sbCfg)
	r.call(sbCfg.GetMetadata(), "CreateContainer "+cfg.GetMetadata().GetName(), begin, err)
	return id, err
}

// runAgentFreeze runs s with an agent in mode on a node of its own. It
// fails t only for what must hold in every run: nothing lost.
func runAgentFreeze(t *testing.T, mode agent.Mode, s agentFreeze) agentFreezeReport {
	n := testnode.Start(t)
	img := n.PushImage(t, "syncpod/freeze", testnode.WithSize(4<<20))
	name := func(i int) string { return fmt.Sprintf("freeze-%02d", i) }
	// The events of the pods added during the freeze, to tell where the
	// time after the thaw goes.
	var traceMu sync.Mutex
	var trace []agent.Event
	traced := map[string]bool{}
	for i := s.running; i < s.running+s.created; i++ {
		traced["default/"+name(i)] = true
	}
	wrap := func(rt cri.RuntimeService) cri.RuntimeService {
		return &tracingRuntime{RuntimeService: rt, traced: traced, note: func(e agent.Event) {
			traceMu.Lock()
			trace = append(trace, e)
			traceMu.Unlock()
		}}
	}
	a := startRealAgent(t, n, wrap, agent.WithMode(mode), agent.WithEventHook(func(e agent.Event) {
		if traced[e.Pod] {
			traceMu.Lock()
			trace = append(trace, e)
			traceMu.Unlock()
		}
	}))
	add := func(from, to int) {
		for i := from; i < to; i++ {
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: freezePod(name(i), img)})
		}
	}
	running := func(from, to int) func() bool {
		return func() bool {
			for i := from; i < to; i++ {
				if podState(a, name(i)).State != agent.PodRunning {
					return false
				}
			}
			return true
		}
	}
	add(0, s.running)
	waitForLong(t, "the pods to run before the freeze", 5*time.Minute, running(0, s.running))
	waitForLong(t, "healthy before the freeze", time.Minute, func() bool { return a.Healthy() == nil })

	hw := watchHealth(a)
	t0 := time.Now()
	f, err := n.FreezeContainerd(t)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	add(s.running, s.running+s.created)
	time.Sleep(time.Until(t0.Add(s.freeze)))
	if err := f.Thaw(); err != nil {
		t.Fatal(err)
	}
	thawed := time.Now()
	rep := agentFreezeReport{mode: mode}
	waitForLong(t, "healthy after the thaw", 3*time.Minute, func() bool { return a.Healthy() == nil })
	rep.toHealthy = time.Since(thawed)
	waitForLong(t, "the pods added during the freeze to run", 5*time.Minute, running(0, s.running+s.created))
	rep.toRunning = time.Since(thawed)
	rep.changes = hw.end(t0)
	rep.stats = a.Stats()
	traceMu.Lock()
	for _, e := range trace {
		l := fmt.Sprintf("T%+.1fs %s %s %s/%d", e.Time.Sub(t0).Seconds(), e.Pod, e.Type, e.Container, e.Attempt)
		if e.Duration > 0 {
			l += " " + e.Duration.Round(time.Millisecond).String()
		}
		if e.Err != nil {
			l += ": " + e.Err.Error()
		}
		rep.trace = append(rep.trace, l)
	}
	traceMu.Unlock()

	// Nothing lost: one ready sandbox per pod, one running app container,
	// never created twice.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sbs, err := n.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := n.RuntimeService().ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	perPod := map[string]int{}
	for _, sb := range sbs.GetItems() {
		perPod[sb.GetMetadata().GetName()]++
	}
	for i := range s.running + s.created {
		if perPod[name(i)] != 1 {
			rep.lost = append(rep.lost, fmt.Sprintf("%s: %d sandboxes", name(i), perPod[name(i)]))
		}
	}
	for _, c := range cs.GetContainers() {
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || c.GetMetadata().GetAttempt() != 0 {
			rep.lost = append(rep.lost, fmt.Sprintf("container %s %v attempt %d", c.GetMetadata().GetName(), c.GetState(), c.GetMetadata().GetAttempt()))
		}
	}
	if d := len(cs.GetContainers()) - (s.running + s.created); d != 0 {
		rep.lost = append(rep.lost, fmt.Sprintf("%d containers more than pods", d))
	}
	if len(rep.lost) > 0 {
		t.Errorf("%s: after the freeze: %s", mode, strings.Join(rep.lost, "; "))
	}
	return rep
}

// TestRealNodeFreezeAgent is the agent's short stalled-runtime scenario,
// run in CI: 5 running pods, containerd frozen for 50 s (the runtime
// check's period, 30 s, plus its 10-s bound, and some), 2 pods added
// during the freeze. Healthy() must turn unhealthy during the freeze and
// name the runtime, never the PLEG; it is healthy again after the thaw,
// and nothing is lost. In both modes.
func TestRealNodeFreezeAgent(t *testing.T) {
	s := agentFreeze{running: 5, freeze: 50 * time.Second, created: 2}
	var lines []string
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			rep := runAgentFreeze(t, mode, s)
			lines = append(lines, rep.String())
			t.Log(rep.String())
			var named, blamed bool
			for _, c := range rep.changes {
				named = named || (c.at > 0 && strings.Contains(c.err, "container runtime is not responding"))
				blamed = blamed || strings.Contains(c.err, "PLEG")
			}
			if !named || blamed {
				t.Errorf("Healthy() through a %v freeze: %v; want the runtime named, never the PLEG", s.freeze, rep.changes)
			}
		})
	}
	t.Logf("agent, %d running pods, containerd frozen %v, %d pods added during the freeze:\n%s",
		s.running, s.freeze, s.created, strings.Join(lines, ""))
}

// TestFreezeScenariosAgent measures the agent through the freeze
// scenarios of the shim's TestFreezeScenarios: 20 running pods, containerd
// frozen 60 s or 4 minutes, 2 pods added during the freeze.
//
//	SYNCPOD_FREEZE_SCENARIOS=1 SYNCPOD_REALNODE=require go test -run FreezeScenariosAgent -v -timeout 60m ./syncpod/agent
func TestFreezeScenariosAgent(t *testing.T) {
	if os.Getenv("SYNCPOD_FREEZE_SCENARIOS") != "1" {
		t.Skip("set SYNCPOD_FREEZE_SCENARIOS=1 to measure the freeze scenarios (about 15 minutes)")
	}
	var report []string
	for _, sc := range []struct {
		name string
		s    agentFreeze
	}{
		{"a-60s", agentFreeze{running: 20, freeze: time.Minute, created: 2}},
		{"b-4min", agentFreeze{running: 20, freeze: 4 * time.Minute, created: 2}},
	} {
		for _, mode := range modes {
			t.Run(sc.name+"/"+string(mode), func(t *testing.T) {
				rep := runAgentFreeze(t, mode, sc.s)
				report = append(report, sc.name+" "+rep.String())
				t.Log(sc.name + " " + rep.String())
			})
		}
	}
	t.Logf("agent:\n%s", strings.Join(report, ""))
}

// waitForLong is waitFor with its own limit, polling every 100 ms: the
// freeze scenarios wait minutes, on a real node.
func waitForLong(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBurstSlowDiskAgent is scenario (c) of the stalled-runtime
// benchmark for the agent: 50 pods at once on containerd with its disk
// throttled to testnode.SmallCloudDisk (the image pulled beforehand, as the
// kubelet's burst does), in both modes. It logs the time until every pod
// runs, the pod startup p50 / p99, the longest relist and Healthy() over
// time, and fails only when something is lost.
//
//	SYNCPOD_FREEZE_SCENARIOS=1 SYNCPOD_REALNODE=require go test -run BurstSlowDiskAgent -v -timeout 60m ./syncpod/agent
func TestBurstSlowDiskAgent(t *testing.T) {
	if os.Getenv("SYNCPOD_FREEZE_SCENARIOS") != "1" {
		t.Skip("set SYNCPOD_FREEZE_SCENARIOS=1 to measure the 50-pod burst on a slow disk (about 10 minutes)")
	}
	const pods = 50
	var report []string
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			n := testnode.Start(t)
			img := n.PushImage(t, "syncpod/burst", testnode.WithSize(4<<20))
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			if _, err := n.ImageService().PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
				t.Fatal(err)
			}
			a := startRealAgent(t, n, nil, agent.WithMode(mode))
			waitForLong(t, "healthy", time.Minute, func() bool { return a.Healthy() == nil })
			d, err := n.SlowDisk(t, testnode.SmallCloudDisk)
			if err != nil {
				t.Fatal(err)
			}
			hw := watchHealth(a)
			t0 := time.Now()
			for i := range pods {
				a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: freezePod(fmt.Sprintf("burst-%02d", i), img)})
			}
			waitForLong(t, "every pod to run", 10*time.Minute, func() bool {
				s := a.Snapshot()
				return s.Total == pods && s.Running == pods
			})
			all := time.Since(t0)
			if err := d.Undo(); err != nil {
				t.Error(err)
			}
			changes := hw.end(t0)
			st := a.Stats()
			sbs, err := n.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
			if err != nil {
				t.Fatal(err)
			}
			cs, err := n.RuntimeService().ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var lost []string
			if len(sbs.GetItems()) != pods || len(cs.GetContainers()) != pods {
				lost = append(lost, fmt.Sprintf("%d sandboxes and %d containers for %d pods", len(sbs.GetItems()), len(cs.GetContainers()), pods))
			}
			for _, c := range cs.GetContainers() {
				if c.GetMetadata().GetAttempt() != 0 {
					lost = append(lost, fmt.Sprintf("container %s attempt %d", c.GetId(), c.GetMetadata().GetAttempt()))
				}
			}
			if len(lost) > 0 {
				t.Errorf("%s: after the burst: %s", mode, strings.Join(lost, "; "))
			}
			line := fmt.Sprintf("agent-%-8s all %d running after %v; startup p50 %v p99 %v; longest relist %v; PLEG unhealthy %v; Healthy() changes %v; lost %d",
				mode, pods, all.Round(10*time.Millisecond), quantile(st.Startups, 0.5).Round(10*time.Millisecond), quantile(st.Startups, 0.99).Round(10*time.Millisecond),
				st.MaxRelist.Round(time.Millisecond), st.PLEGUnhealthy, changes, len(lost))
			t.Log(line)
			report = append(report, line)
		})
	}
	t.Logf("agent, %d pods at once, containerd's disk at %+v:\n%s", pods, testnode.SmallCloudDisk, strings.Join(report, "\n"))
}

// quantile is the q-quantile of ds (nearest rank), 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
