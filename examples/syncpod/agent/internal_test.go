package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/podworkers"
)

func testPod(init []corev1.Container, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, InitContainers: init}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "img-" + c})
	}
	return p
}

func status(sandbox bool, cs ...*containerInstance) *runtimePodStatus {
	st := &runtimePodStatus{UID: "uid-1", Containers: cs}
	if sandbox {
		st.SandboxID, st.SandboxReady = "sb", true
	}
	st.index()
	return st
}

func names(steps []containerStart) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.spec.Name)
	}
	return out
}

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestComputePodActions(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	initc := corev1.Container{Name: "init", Image: "img-init"}
	side := corev1.Container{Name: "side", Image: "img-side", RestartPolicy: &always}
	pod := testPod([]corev1.Container{initc, side}, "a", "b")
	hash := func(name string) string {
		for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
			if c.Name == name {
				return containerHash(&c)
			}
		}
		return ""
	}
	running := func(name string) *containerInstance {
		return &containerInstance{ID: "id-" + name, Name: name, State: stateRunning, Hash: hash(name)}
	}
	exited := func(name string, code int32) *containerInstance {
		return &containerInstance{ID: "id-" + name, Name: name, State: stateExited, ExitCode: code, Hash: hash(name)}
	}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	for _, tc := range []struct {
		name      string
		st        *runtimePodStatus
		chain     bool
		sandbox   bool
		init      []string
		start     []string
		kill      int
		running   bool
		podFailed bool
	}{
		{name: "no sandbox: create it and start the first init only", st: status(false), sandbox: true, init: []string{"init"}},
		{name: "init running: wait", st: status(true, running("init"))},
		{name: "init done, chain: sidecar then regular containers in one sync", st: status(true, exited("init", 0)), chain: true,
			init: []string{"side"}, start: []string{"a", "b"}},
		{name: "init done, kubelet: the sidecar alone", st: status(true, exited("init", 0)), init: []string{"side"}},
		{name: "all up", st: status(true, exited("init", 0), running("side"), running("a"), running("b")), running: true},
		{name: "one regular missing", st: status(true, exited("init", 0), running("side"), running("a")), start: []string{"b"}},
		{name: "container not in the spec is killed",
			st: status(true, exited("init", 0), running("side"), running("a"), running("b"), running("old")), kill: 1, running: true},
		{name: "spec changed: kill and start again",
			st:   status(true, exited("init", 0), running("side"), &containerInstance{ID: "x", Name: "a", State: stateRunning, Hash: "stale"}, running("b")),
			kill: 1, start: []string{"a"}},
		{name: "assumed container is neither started again nor killed",
			st: status(true, exited("init", 0), running("side"), &containerInstance{Name: "a", State: stateRunning, Assumed: true},
				&containerInstance{ID: "c", Name: "a", State: stateUnknown}, running("b"))},
		{name: "created-but-not-started is replaced",
			st:   status(true, exited("init", 0), running("side"), &containerInstance{ID: "c", Name: "a", State: stateUnknown}, running("b")),
			kill: 1, start: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := computePodActions(pod, tc.st, newCrashBackoff(clk, crashLoopInitial, crashLoopMax), tc.chain, nil)
			if a.createSandbox != tc.sandbox || !eq(names(a.initSteps), tc.init) || !eq(names(a.start), tc.start) ||
				len(a.kill) != tc.kill || a.allRunning != tc.running || a.podFailed != tc.podFailed {
				t.Errorf("got sandbox=%v init=%v start=%v kill=%d running=%v failed=%v", a.createSandbox, names(a.initSteps),
					names(a.start), len(a.kill), a.allRunning, a.podFailed)
			}
		})
	}
}

func TestComputePodActionsRestartPolicies(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	for _, tc := range []struct {
		policy    corev1.RestartPolicy
		code      int32
		restart   bool
		finished  bool
		succeeded bool
	}{
		{corev1.RestartPolicyAlways, 0, true, false, false},
		{corev1.RestartPolicyAlways, 1, true, false, false},
		{corev1.RestartPolicyOnFailure, 1, true, false, false},
		{corev1.RestartPolicyOnFailure, 0, false, true, true},
		{corev1.RestartPolicyNever, 1, false, true, false},
		{corev1.RestartPolicyNever, 0, false, true, true},
	} {
		pod := testPod(nil, "a")
		pod.Spec.RestartPolicy = tc.policy
		st := status(true, &containerInstance{ID: "x", Name: "a", State: stateExited, ExitCode: tc.code, FinishedAt: clk.Now(), Hash: containerHash(&pod.Spec.Containers[0])})
		a := computePodActions(pod, st, newCrashBackoff(clk, crashLoopInitial, crashLoopMax), true, nil)
		if (len(a.start) == 1) != tc.restart || a.finished != tc.finished || a.succeeded != tc.succeeded {
			t.Errorf("%s exit %d: start=%v finished=%v succeeded=%v", tc.policy, tc.code, names(a.start), a.finished, a.succeeded)
		}
		if tc.restart && (a.start[0].attempt != 1 || len(a.start[0].remove) != 1) {
			t.Errorf("%s exit %d: restart attempt %d removes %v", tc.policy, tc.code, a.start[0].attempt, a.start[0].remove)
		}
	}

	// A failed regular init container under Never fails the pod.
	pod := testPod([]corev1.Container{{Name: "init", Image: "i"}}, "a")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	a := computePodActions(pod, status(true, &containerInstance{Name: "init", State: stateExited, ExitCode: 2}), newCrashBackoff(clk, crashLoopInitial, crashLoopMax), true, nil)
	if !a.podFailed || !a.finished || len(a.start) != 0 {
		t.Errorf("init failure under Never: %+v", a)
	}
}

// The kubelet's sequence: the first restart is immediate, then 10 s
// doubling to 5 min; a container that stays up 10 min starts over.
func TestCrashBackoffSequence(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	b := newCrashBackoff(clk, crashLoopInitial, crashLoopMax)
	var waits []time.Duration
	for i := 0; i < 9; i++ {
		finished := clk.Now()
		in, left, _ := b.inBackoff("k", finished)
		if !in {
			left = 0
		}
		waits = append(waits, left)
		clk.Step(left)
		if in, _, _ := b.inBackoff("k", finished); in {
			t.Fatalf("restart %d still in back-off after waiting %v", i, left)
		}
		b.next("k", finished)
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second, 300 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits = %v, want %v", waits, want)
		}
	}
	clk.Step(11 * time.Minute) // ran fine for longer than 2x the maximum
	if d := b.next("k", clk.Now()); d != crashLoopInitial {
		t.Errorf("after a long healthy run the back-off is %v, want %v", d, crashLoopInitial)
	}
}

func TestPodWorkersCoalesceLastWins(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	var mu sync.Mutex
	var seen []string
	sync := func(ctx context.Context, pod *corev1.Pod) syncResult {
		mu.Lock()
		seen = append(seen, pod.Annotations["v"])
		mu.Unlock()
		entered <- struct{}{}
		if pod.Annotations["v"] == "1" {
			<-release
		}
		return syncResult{}
	}
	w := newTestWorkers(t, clk, sync, func(context.Context, *corev1.Pod, time.Duration) error { return nil })
	defer func() { _ = w.Close() }()
	mk := func(v string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u", Annotations: map[string]string{"v": v}}}
	}
	update(t, w, mk("1"))
	<-entered // sync of v1 is running
	for _, v := range []string{"2", "3", "4"} {
		update(t, w, mk(v))
	}
	close(release)
	<-entered
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[1] != "4" {
		t.Fatalf("syncs saw %v, want [1 4]: updates during a sync coalesce, the last wins", seen)
	}
}

func TestPodWorkersKillCancelsRunningSync(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	entered := make(chan struct{})
	var cancelled, killed atomic.Bool
	sync := func(ctx context.Context, pod *corev1.Pod) syncResult {
		close(entered)
		<-ctx.Done()
		cancelled.Store(true)
		return syncResult{err: ctx.Err()}
	}
	kill := func(ctx context.Context, pod *corev1.Pod, grace time.Duration) error {
		if ctx.Err() != nil {
			t.Error("kill got a cancelled context")
		}
		if grace != 5*time.Second {
			t.Errorf("kill got grace %v, want the deletion's 5s", grace)
		}
		killed.Store(true)
		return nil
	}
	w := newTestWorkers(t, clk, sync, kill)
	update(t, w, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}})
	<-entered
	grace := 5 * time.Second
	if err := w.Update(podworkers.PodUpdate{Type: podworkers.UpdateKill, RuntimePod: &podworkers.RuntimePod{UID: "u"}, GracePeriod: &grace}); err != nil {
		t.Fatal(err)
	}
	for w.finished.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	_ = w.Close()
	if !cancelled.Load() || !killed.Load() || w.finished.Load() != 1 || w.Phase("u") != podworkers.PhaseFinished {
		t.Fatalf("cancelled=%v killed=%v finished=%d phase=%v", cancelled.Load(), killed.Load(), w.finished.Load(), w.Phase("u"))
	}
}

// A long-lived agent keeps a bounded record of startups: the latest
// startupWindow, oldest first, and the count of all.
func TestStartupRingIsBounded(t *testing.T) {
	var r startupRing
	for i := 1; i <= 2*startupWindow+10; i++ {
		r.add(time.Duration(i))
	}
	got := r.ordered()
	if len(got) != startupWindow || r.total != 2*startupWindow+10 {
		t.Fatalf("kept %d of %d, want %d of %d", len(got), r.total, startupWindow, 2*startupWindow+10)
	}
	for i, d := range got {
		if want := time.Duration(startupWindow + 11 + i); d != want {
			t.Fatalf("startup %d = %v, want %v (oldest first)", i, d, want)
		}
	}
}
