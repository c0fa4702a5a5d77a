package agent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/concurrentstart/podplan"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

const probeImage = "registry.sim/app:1"

// fakeNode is a simulated runtime and an agent sharing a deadline clock:
// time moves only when the test steps it.
type fakeNode struct {
	t   *testing.T
	clk *deadlineClock
	n   *simNode
	a   *agent.Agent
	ev  *events
}

func startFakeNode(t *testing.T, mode agent.Mode, opts ...agent.Option) *fakeNode {
	t.Helper()
	return startWrappedFakeNode(t, mode, nil, opts...)
}

// startWrappedFakeNode is startFakeNode with the agent's runtime service
// wrapped by wrap (nil: not wrapped).
func startWrappedFakeNode(t *testing.T, mode agent.Mode, wrap func(cri.RuntimeService) cri.RuntimeService, opts ...agent.Option) *fakeNode {
	t.Helper()
	clk := newDeadlineClock(time.Unix(1_700_000_000, 0))
	n := startSim(t, crisim.WithClock(clk), crisim.WithImage(probeImage, 1))
	ev := &events{t: t}
	var rt cri.RuntimeService = n.client.CRI()
	if wrap != nil {
		rt = wrap(rt)
	}
	a, err := agent.New(rt, n.client.CRI(), append([]agent.Option{agent.WithMode(mode), agent.WithClock(clk),
		agent.WithEventHook(ev.hook), agent.WithHealthSampling(time.Hour)}, opts...)...)
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	if err := a.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(a.Stop)
	return &fakeNode{t: t, clk: clk, n: n, a: a, ev: ev}
}

// drive waits for cond, stepping the clock to its next deadline whenever
// the test may step (steppable) and nothing has moved for a moment: no
// new runtime call and no new agent event. The second look covers work
// that none of the counts sees, such as a probe's own goroutine between
// two calls.
func (f *fakeNode) drive(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(90 * time.Second) // turns a hang into a failure
	idle := func() (bool, int) {
		calls := 0
		for _, c := range f.n.rt.CallCounts() {
			calls += int(c)
		}
		return steppable(f.a, f.n.rt), calls + len(f.ev.find(func(agent.Event) bool { return true }))
	}
	for !cond() {
		if time.Now().After(deadline) {
			next, ok := f.clk.next()
			f.t.Fatalf("timed out waiting for %s (fake time %v; quiescent %v, runtime idle %v, next deadline %v %v)", what, f.clk.Now(), f.a.Quiescent(), runtimeIdle(f.n.rt), next, ok)
		}
		if ok, before := idle(); ok {
			time.Sleep(5 * time.Millisecond)
			if ok, after := idle(); ok && after == before && !cond() {
				f.clk.stepToNext()
			}
			continue
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// running returns the id of the running instance of container name with
// the given attempt, "" if there is none.
func (f *fakeNode) running(name string, attempt uint32) string {
	cs, err := f.n.client.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return ""
	}
	for _, c := range cs {
		if c.Metadata.Name == name && c.Metadata.Attempt == attempt {
			return c.Id
		}
	}
	return ""
}

func (f *fakeNode) count(typ agent.EventType, container string) int {
	return len(f.ev.find(func(e agent.Event) bool { return e.Type == typ && e.Container == container }))
}

func (f *fakeNode) first(typ agent.EventType, container string, attempt uint32) (agent.Event, bool) {
	all := f.ev.find(func(e agent.Event) bool { return e.Type == typ && e.Container == container && e.Attempt == attempt })
	if len(all) == 0 {
		return agent.Event{}, false
	}
	return all[0], true
}

// execLog records the commands ExecSync ran, with the fake time.
type execLog struct {
	mu    sync.Mutex
	calls []execCall
}

type execCall struct {
	id  string
	cmd string
	at  time.Time
}

func (l *execLog) add(id string, cmd []string, at time.Time) {
	l.mu.Lock()
	l.calls = append(l.calls, execCall{id: id, cmd: strings.Join(cmd, " "), at: at})
	l.mu.Unlock()
}

func (l *execLog) of(cmd string) []execCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []execCall
	for _, c := range l.calls {
		if c.cmd == cmd {
			out = append(out, c)
		}
	}
	return out
}

func execProbe(cmd string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}},
		PeriodSeconds: period, FailureThreshold: failures}
}

func probePod(name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: containers}}
}

// Readiness is false until the first success, which comes no earlier than
// initialDelaySeconds after the container started; it turns false after
// failureThreshold failures in a row, one period apart, and true again
// after successThreshold successes. A probe the runtime could not run
// counts for nothing.
func TestProbeReadiness(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			f := startFakeNode(t, mode)
			var healthy atomic.Bool
			var broken atomic.Bool
			log := &execLog{}
			f.n.rt.SetExecHandler(func(_ context.Context, id string, cmd []string) ([]byte, []byte, int32, error) {
				log.add(id, cmd, f.clk.Now())
				if broken.Load() {
					return nil, nil, 0, fmt.Errorf("runc exec failed")
				}
				if healthy.Load() {
					return []byte("ok"), nil, 0, nil
				}
				return nil, []byte("not yet"), 1, nil
			})
			probe := execProbe("ready?", 10, 3)
			probe.InitialDelaySeconds = 5
			probe.SuccessThreshold = 2
			pod := probePod("ready", corev1.Container{Name: "app", Image: probeImage, ReadinessProbe: probe})
			healthy.Store(true)
			f.a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
			var id string
			f.drive("app running", func() bool { id = f.running("app", 0); return id != "" })
			if _, ready := f.a.ProbeState(pod.UID, "app", id); ready {
				t.Fatal("ready before any probe ran")
			}
			f.drive("two successes", func() bool { return len(log.of("ready?")) >= 2 })
			f.drive("ready", func() bool { _, r := f.a.ProbeState(pod.UID, "app", id); return r })
			calls := log.of("ready?")
			started, _ := f.first(agent.EventStarted, "app", 0)
			if d := calls[0].at.Sub(started.Time); d < 5*time.Second || d > 5*time.Second+agent.RelistPeriod {
				t.Errorf("first probe %v after the start, want the 5 s initial delay", d)
			}
			if d := calls[1].at.Sub(calls[0].at); d != 10*time.Second {
				t.Errorf("second probe %v after the first, want the 10 s period", d)
			}

			healthy.Store(false)
			before := len(log.of("ready?"))
			f.drive("not ready", func() bool { _, r := f.a.ProbeState(pod.UID, "app", id); return !r })
			if n := len(log.of("ready?")) - before; n != 3 {
				t.Errorf("not ready after %d failed probes, want the failureThreshold of 3", n)
			}
			// The events follow the verdict, outside the prober's lock: wait
			// for them without moving the clock, then count.
			waitFor(t, "the Unhealthy events", func() bool { return f.count(agent.EventUnhealthy, "app") >= 3 })
			if n := f.count(agent.EventUnhealthy, "app"); n != 3 {
				t.Errorf("%d Unhealthy events, want one per failed probe (3)", n)
			}

			broken.Store(true)
			healthy.Store(true)
			before = len(log.of("ready?"))
			f.drive("three errored probes", func() bool { return len(log.of("ready?")) >= before+3*3 }) // 3 tries each
			if _, r := f.a.ProbeState(pod.UID, "app", id); r {
				t.Error("ready after probes that could not run")
			}
			broken.Store(false)
			before = len(log.of("ready?"))
			f.drive("ready again", func() bool { _, r := f.a.ProbeState(pod.UID, "app", id); return r })
			if n := len(log.of("ready?")) - before; n != 2 {
				t.Errorf("ready again after %d successes, want the successThreshold of 2", n)
			}

			// A removed pod is probed no more.
			f.a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: pod})
			f.drive("pod gone", func() bool { return f.a.Snapshot().Total == 0 })
			before = len(log.of("ready?"))
			later := f.clk.Now().Add(time.Minute)
			f.drive("a minute", func() bool { return !f.clk.Now().Before(later) })
			if n := len(log.of("ready?")) - before; n != 0 {
				t.Errorf("%d probes of a removed pod", n)
			}
		})
	}
}

// A liveness probe that fails failureThreshold times kills the container
// (EventKilling with the kubelet's message), which is restarted at once the
// first time and after the crash-loop back-off the next, with its restart
// count going up.
func TestProbeLivenessRestartsWithBackoff(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			f := startFakeNode(t, mode)
			f.n.rt.SetExecHandler(func(context.Context, string, []string) ([]byte, []byte, int32, error) {
				return nil, []byte("dead"), 1, nil
			})
			pod := probePod("live", corev1.Container{Name: "app", Image: probeImage, LivenessProbe: execProbe("alive?", 1, 3)})
			f.a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
			killedAt := func(attempt uint32) time.Time {
				t.Helper()
				var e agent.Event
				f.drive(fmt.Sprintf("attempt %d killed", attempt), func() bool {
					var ok bool
					e, ok = f.first(agent.EventKilling, "app", attempt)
					return ok
				})
				if want := "Container app failed liveness probe, will be restarted"; e.Err == nil || e.Err.Error() != want {
					t.Fatalf("Killing event says %v, want %q", e.Err, want)
				}
				return e.Time
			}
			startedAt := func(attempt uint32) time.Time {
				t.Helper()
				var e agent.Event
				f.drive(fmt.Sprintf("attempt %d started", attempt), func() bool {
					var ok bool
					e, ok = f.first(agent.EventStarted, "app", attempt)
					return ok
				})
				return e.Time
			}
			s0 := startedAt(0)
			k0 := killedAt(0)
			if d := k0.Sub(s0); d < 2*time.Second || d > 2*time.Second+agent.RelistPeriod {
				t.Errorf("killed %v after the start, want after the third failure (2 s: probes at 0, 1, 2 s)", d)
			}
			s1 := startedAt(1)
			k1 := killedAt(1)
			s2 := startedAt(2)
			slack := time.Duration(0)
			if mode == agent.ModeBaseline {
				slack = agent.RelistPeriod
			}
			if d := s1.Sub(k0); d > slack {
				t.Errorf("first restart %v after the kill, want at once", d)
			}
			if d := s2.Sub(k1); d < 10*time.Second || d > 10*time.Second+slack {
				t.Errorf("second restart %v after the kill, want the 10 s crash-loop back-off", d)
			}
			f.drive("2 restarts reported", func() bool { return podState(f.a, "live").Restarts == 2 })
			if n := f.count(agent.EventUnhealthy, "app"); n < 6 {
				t.Errorf("%d Unhealthy events, want one per failed probe", n)
			}
		})
	}
}

// An exec probe that outlives its timeoutSeconds fails ("timed out"): with
// failureThreshold 1 the liveness probe kills the container.
func TestProbeTimeout(t *testing.T) {
	f := startFakeNode(t, agent.ModeSyncPod)
	entered := make(chan struct{}, 1)
	f.n.rt.SetExecHandler(func(ctx context.Context, _ string, _ []string) ([]byte, []byte, int32, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-ctx.Done() // hangs until the runtime ends it
		return nil, nil, 0, nil
	})
	probe := execProbe("hang", 10, 1)
	probe.TimeoutSeconds = 2
	pod := probePod("slow", corev1.Container{Name: "app", Image: probeImage, LivenessProbe: probe})
	f.a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
	f.drive("app running", func() bool { return f.running("app", 0) != "" })
	<-entered
	// The probe is in flight (the agent is busy): move time by hand, to
	// the end of the runtime's 2 s timeout.
	f.clk.Step(2 * time.Second)
	f.drive("app killed", func() bool { return f.count(agent.EventKilling, "app") > 0 })
	un := f.ev.find(func(e agent.Event) bool { return e.Type == agent.EventUnhealthy })
	if len(un) == 0 || !strings.Contains(un[0].Err.Error(), "timed out") {
		t.Fatalf("Unhealthy events %v, want a timed-out liveness probe", un)
	}
}

// A sidecar's startup probe gates what follows it: the regular container
// starts only once the probe passed, and the sidecar's readiness probe
// does not run before; a regular container's startup probe that fails
// failureThreshold times kills it.
func TestProbeStartupGatesSidecarFollowers(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			f := startFakeNode(t, mode)
			var up atomic.Bool
			log := &execLog{}
			f.n.rt.SetExecHandler(func(_ context.Context, id string, cmd []string) ([]byte, []byte, int32, error) {
				log.add(id, cmd, f.clk.Now())
				if cmd[0] == "never" || (cmd[0] == "up?" && !up.Load()) {
					return nil, nil, 1, nil
				}
				return nil, nil, 0, nil
			})
			always := corev1.ContainerRestartPolicyAlways
			pod := probePod("gated", corev1.Container{Name: "app", Image: probeImage,
				StartupProbe: execProbe("never", 1, 5)})
			pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: probeImage, RestartPolicy: &always,
				StartupProbe: execProbe("up?", 1, 1000), ReadinessProbe: execProbe("proxy-ready?", 1, 3)}}
			f.a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
			f.drive("five failed startup probes", func() bool { return len(log.of("up?")) >= 5 })
			if n := f.count(agent.EventStarted, "app"); n != 0 {
				t.Fatal("app started before the sidecar's startup probe passed")
			}
			if n := len(log.of("proxy-ready?")); n != 0 {
				t.Fatalf("the sidecar's readiness probe ran %d times before its startup probe passed", n)
			}
			id := f.running("proxy", 0)
			if started, _ := f.a.ProbeState(pod.UID, "proxy", id); started {
				t.Fatal("sidecar reported started")
			}
			up.Store(true)
			f.drive("app started", func() bool { return f.count(agent.EventStarted, "app") > 0 })
			if started, _ := f.a.ProbeState(pod.UID, "proxy", id); !started {
				t.Fatal("sidecar not reported started")
			}
			f.drive("the sidecar ready", func() bool { _, r := f.a.ProbeState(pod.UID, "proxy", id); return r })
			// app's own startup probe never passes: killed after 5 failures.
			var e agent.Event
			f.drive("app killed", func() bool {
				var ok bool
				e, ok = f.first(agent.EventKilling, "app", 0)
				return ok
			})
			if want := "Container app failed startup probe, will be restarted"; e.Err.Error() != want {
				t.Fatalf("Killing event says %v, want %q", e.Err, want)
			}
			f.drive("app restarted", func() bool { return f.count(agent.EventStarted, "app") > 1 })
		})
	}
}

// A start-after ":ready" edge waits for the readiness of the container it
// names.
func TestProbeStartAfterReady(t *testing.T) {
	f := startFakeNode(t, agent.ModeSyncPod)
	var ready atomic.Bool
	f.n.rt.SetExecHandler(func(context.Context, string, []string) ([]byte, []byte, int32, error) {
		if ready.Load() {
			return nil, nil, 0, nil
		}
		return nil, nil, 1, nil
	})
	pod := probePod("ordered",
		corev1.Container{Name: "db", Image: probeImage, ReadinessProbe: execProbe("db-ready?", 1, 1)},
		corev1.Container{Name: "app", Image: probeImage})
	pod.Annotations = map[string]string{podplan.AnnotationStartAfter: `{"app": ["db:ready"]}`}
	f.a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
	f.drive("three failed readiness probes", func() bool { return f.count(agent.EventUnhealthy, "db") >= 3 })
	if f.count(agent.EventStarted, "app") != 0 {
		t.Fatal("app started before db was ready")
	}
	ready.Store(true)
	f.drive("app started", func() bool { return f.count(agent.EventStarted, "app") > 0 })
}

// Many pods' probes share the bounded pool: never more probes at once
// than WithProbeWorkers, and every container is probed.
func TestProbeWorkersBounded(t *testing.T) {
	n := startSim(t, crisim.WithImage(probeImage, 1))
	var inflight, most atomic.Int32
	probed := sync.Map{}
	n.rt.SetExecHandler(func(_ context.Context, id string, _ []string) ([]byte, []byte, int32, error) {
		cur := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			m := most.Load()
			if cur <= m || most.CompareAndSwap(m, cur) {
				break
			}
		}
		probed.Store(id, true)
		time.Sleep(2 * time.Millisecond) // long enough for probes to overlap
		return nil, nil, 0, nil
	})
	a := startAgent(t, n, agent.WithProbeWorkers(2))
	const pods = 20
	for i := range pods {
		a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: probePod(fmt.Sprintf("p%d", i),
			corev1.Container{Name: "app", Image: probeImage, ReadinessProbe: execProbe("ready?", 1, 3)})})
	}
	waitFor(t, "every container probed", func() bool {
		k := 0
		probed.Range(func(any, any) bool { k++; return true })
		return k == pods
	})
	if m := most.Load(); m > 2 {
		t.Fatalf("%d probes ran at once, want at most the 2 probe workers", m)
	}
}

// A negative probe worker count is refused.
func TestProbeWorkersNegative(t *testing.T) {
	n := startSim(t)
	if _, err := agent.New(n.client.CRI(), n.client.CRI(), agent.WithProbeWorkers(-1)); err == nil {
		t.Fatal("New accepted WithProbeWorkers(-1)")
	}
}

// A postStart hook runs before the container counts as started; one that
// fails gives FailedPostStartHook, kills the container (Killing) and
// restarts it through the crash-loop back-off.
func TestPostStartHook(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			f := startFakeNode(t, mode)
			var order []string
			var mu sync.Mutex
			f.n.rt.SetExecHandler(func(_ context.Context, _ string, cmd []string) ([]byte, []byte, int32, error) {
				mu.Lock()
				order = append(order, cmd[0])
				mu.Unlock()
				if cmd[0] == "fail" {
					return nil, []byte("boom"), 1, nil
				}
				return nil, nil, 0, nil
			})
			hook := func(cmd string) *corev1.Lifecycle {
				return &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}}}
			}
			good := probePod("good", corev1.Container{Name: "app", Image: probeImage, Lifecycle: hook("setup")})
			f.a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: good})
			f.drive("app started", func() bool { return f.count(agent.EventStarted, "app") > 0 })
			mu.Lock()
			if !slices.Contains(order, "setup") {
				t.Fatal("EventStarted before the postStart hook ran")
			}
			mu.Unlock()

			bad := probePod("bad", corev1.Container{Name: "web", Image: probeImage, Lifecycle: hook("fail")})
			f.a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: bad})
			failedAt := func(attempt uint32) time.Time {
				t.Helper()
				var e agent.Event
				f.drive(fmt.Sprintf("attempt %d hook failed", attempt), func() bool {
					var ok bool
					e, ok = f.first(agent.EventFailedPostStartHook, "web", attempt)
					return ok
				})
				return e.Time
			}
			f0, f1, f2 := failedAt(0), failedAt(1), failedAt(2)
			slack := time.Duration(0)
			if mode == agent.ModeBaseline {
				slack = agent.RelistPeriod
			}
			if d := f1.Sub(f0); d > slack {
				t.Errorf("first restart %v after the failure, want at once", d)
			}
			if d := f2.Sub(f1); d < 10*time.Second || d > 10*time.Second+slack {
				t.Errorf("second restart %v after the failure, want the 10 s back-off", d)
			}
			k, ok := f.first(agent.EventKilling, "web", 0)
			if !ok || k.Err.Error() != "FailedPostStartHook" {
				t.Fatalf("Killing event %v, want reason FailedPostStartHook", k)
			}
			if f.count(agent.EventStarted, "web") != 0 {
				t.Error("a container whose postStart hook failed counted as started")
			}
		})
	}
}

// runningContainers counts the running containers on n.
func runningContainers(n *simNode) int {
	cs, err := n.client.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return -1
	}
	return len(cs)
}

// stops lists rec's StopContainer calls as "name:timeout".
func stops(rec *stopRecorder) []string {
	var out []string
	for _, c := range rec.calls() {
		out = append(out, fmt.Sprintf("%s:%d", c.name, c.timeout))
	}
	return out
}

// A preStop hook that outlives the grace period is cancelled when it ends
// (FailedPreStopHook), and StopContainer still gives the container the
// minimum 2 s; a quick one leaves the rest of the grace period to
// StopContainer.
func TestPreStopHookBoundedByGrace(t *testing.T) {
	rec := &stopRecorder{}
	f := startWrappedFakeNode(t, agent.ModeSyncPod, func(rt cri.RuntimeService) cri.RuntimeService { rec.RuntimeService = rt; return rec })
	n, a, clk, ev := f.n, f.a, f.clk, f.ev
	entered := make(chan struct{}, 1)
	n.rt.SetExecHandler(func(ctx context.Context, _ string, cmd []string) ([]byte, []byte, int32, error) {
		if cmd[0] == "drain" {
			entered <- struct{}{}
			<-ctx.Done() // never ends by itself
		}
		return nil, nil, 0, nil
	})
	grace := int64(5)
	preStop := func(cmd string) *corev1.Lifecycle {
		return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}}}
	}
	pod := probePod("drain", corev1.Container{Name: "slow", Image: probeImage, Lifecycle: preStop("drain")},
		corev1.Container{Name: "quick", Image: probeImage, Lifecycle: preStop("flush")})
	pod.Spec.TerminationGracePeriodSeconds = &grace
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
	f.drive("both containers running", func() bool { return runningContainers(n) == 2 })
	a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: pod})
	<-entered
	waitFor(t, "quick stopped", func() bool { return slices.Contains(stops(rec), "quick:5") })
	if slices.ContainsFunc(stops(rec), func(s string) bool { return strings.HasPrefix(s, "slow:") }) {
		t.Fatal("slow stopped while its preStop hook ran")
	}
	clk.Step(time.Duration(grace) * time.Second)
	waitFor(t, "pod gone", func() bool { return a.Snapshot().Total == 0 })
	if !slices.Contains(stops(rec), "slow:2") {
		t.Fatalf("stops %v, want slow stopped with the minimum 2 s after its hook used the grace period", stops(rec))
	}
	fails := ev.find(func(e agent.Event) bool { return e.Type == agent.EventFailedPreStopHook })
	if len(fails) != 1 || fails[0].Container != "slow" {
		t.Fatalf("FailedPreStopHook events %v, want one for slow", fails)
	}
}

// Termination runs each container's preStop hook before its stop: the
// regular containers' first, then the sidecar's, after they stopped.
func TestPreStopOrderInTermination(t *testing.T) {
	n := startSim(t, crisim.WithImage(probeImage, 1))
	rec := &stopRecorder{RuntimeService: n.client.CRI()}
	a, err := agent.New(rec, n.client.CRI())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	var mu sync.Mutex
	var order []string
	n.rt.SetExecHandler(func(_ context.Context, _ string, cmd []string) ([]byte, []byte, int32, error) {
		mu.Lock()
		// The hook's moment among the stops so far.
		order = append(order, fmt.Sprintf("%s@%d", cmd[0], len(stops(rec))))
		mu.Unlock()
		return nil, nil, 0, nil
	})
	preStop := func(name string) *corev1.Lifecycle {
		return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{name}}}}
	}
	always := corev1.ContainerRestartPolicyAlways
	pod := probePod("ordered-stop",
		corev1.Container{Name: "a", Image: probeImage, Lifecycle: preStop("a")},
		corev1.Container{Name: "b", Image: probeImage, Lifecycle: preStop("b")})
	pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: probeImage, RestartPolicy: &always, Lifecycle: preStop("proxy")}}
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
	waitFor(t, "pod running", allRunning(a, 1))
	a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: pod})
	waitFor(t, "pod gone", func() bool { return a.Snapshot().Total == 0 })
	mu.Lock()
	defer mu.Unlock()
	got := stops(rec)
	if len(order) != 3 || len(got) < 3 {
		t.Fatalf("hooks %v, stops %v; want three of each", order, got)
	}
	if order[2] != "proxy@2" || got[2] != "proxy:30" {
		t.Fatalf("hooks %v, stops %v: want the sidecar's hook after the two regular stops, then its stop", order, got)
	}
	for _, h := range order[:2] {
		if !strings.HasSuffix(h, "@0") && !strings.HasSuffix(h, "@1") {
			t.Fatalf("hooks %v: a regular container's hook ran after both regular stops", order)
		}
	}
}
