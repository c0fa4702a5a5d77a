package shim_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/examples/crishim/shim"
	"github.com/syncpod/syncpod/internal/kubelethost"
	"github.com/syncpod/syncpod/internal/testnode"
)

// kubeletMode is one way of putting the kubelet on a test node: straight
// on containerd's socket, or through a shim with the given Config; with
// evented, the kubelet's evented PLEG (GetContainerEvents) is on.
type kubeletMode struct {
	name    string
	shim    *shim.Config
	evented bool
}

var kubeletModes = []kubeletMode{
	{name: "direct"},
	{name: "shim", shim: &shim.Config{}},
	{name: "shim-async", shim: &shim.Config{AsyncRunPodSandbox: true}},
	{name: "shim-evented", shim: &shim.Config{}, evented: true},
}

// plegThreshold is how old the PLEG's last relist may be before the
// kubelet itself calls the PLEG unhealthy: 3 min, or 10 min with the
// evented PLEG, which relists only every 5 min.
func (m kubeletMode) plegThreshold() time.Duration {
	if m.evented {
		return 10 * time.Minute
	}
	return 3 * time.Minute
}

// kubeletOnNode starts a test node and a kubelet on it, through a shim when
// the mode says so. The crash-loop back-off is capped at 1 s so restarts
// come quickly.
func kubeletOnNode(t *testing.T, m kubeletMode, opts ...kubelethost.Option) (*testnode.Node, *kubelethost.Kubelet) {
	t.Helper()
	n := testnode.Start(t)
	endpoint := n.Endpoint
	if m.shim != nil {
		endpoint = startShim(t, n, *m.shim)
	}
	opts = append([]kubelethost.Option{kubelethost.WithMaxContainerRestartPeriod(time.Second)}, opts...)
	if m.evented {
		opts = append(opts, kubelethost.WithFeatureGate("EventedPLEG", true))
	}
	return n, kubelethost.Start(t, endpoint, opts...)
}

// staticPod is a host-network pod (the node has no CNI) with a short grace
// period, so deleting it is quick.
func staticPod(name string, init []corev1.Container, containers ...corev1.Container) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: &grace,
			InitContainers:                init,
			Containers:                    containers,
		},
	}
}

func workloadContainer(name, img string, args ...string) corev1.Container {
	return corev1.Container{Name: name, Image: img, ImagePullPolicy: corev1.PullIfNotPresent, Args: args}
}

// scenarioPods are the static pods every mode runs.
func scenarioPods(img string) []*corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := workloadContainer("proxy", img, "pause")
	sidecar.RestartPolicy = &always
	return []*corev1.Pod{
		staticPod("with-init", []corev1.Container{workloadContainer("setup", img, "echo", "set up", "exit", "0")},
			workloadContainer("app", img, "pause")),
		staticPod("with-sidecar", []corev1.Container{sidecar}, workloadContainer("app", img, "pause")),
		staticPod("two-apps", nil, workloadContainer("web", img, "pause"), workloadContainer("worker", img, "pause")),
		staticPod("crasher", nil, workloadContainer("crash", img, "sleep", "200ms", "exit", "1")),
		staticPod("doomed", nil, workloadContainer("app", img, "pause")),
	}
}

// podView is what the runtime holds for one pod: its newest sandbox and
// the newest attempt of each container, as containerd lists them.
type podView struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers map[string]*runtimeapi.ContainerStatus // by container name, newest attempt
}

// runtimeView lists, straight from containerd, the sandboxes and containers
// of the kubelet's static pods, by pod name without the node suffix.
func runtimeView(t *testing.T, n *testnode.Node, k *kubelethost.Kubelet) map[string]*podView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt := n.RuntimeService()
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatalf("ListPodSandbox on containerd: %v", err)
	}
	cs, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatalf("ListContainers on containerd: %v", err)
	}
	suffix := "-" + k.NodeName
	out := map[string]*podView{}
	view := func(podName string) *podView {
		name, ok := strings.CutSuffix(podName, suffix)
		if !ok {
			return nil
		}
		if out[name] == nil {
			out[name] = &podView{containers: map[string]*runtimeapi.ContainerStatus{}}
		}
		return out[name]
	}
	for _, sb := range sbs.GetItems() {
		if v := view(sb.GetMetadata().GetName()); v != nil {
			v.sandboxes = append(v.sandboxes, sb)
		}
	}
	for _, c := range cs.GetContainers() {
		v := view(c.GetLabels()["io.kubernetes.pod.name"])
		if v == nil {
			continue
		}
		name := c.GetMetadata().GetName()
		if old := v.containers[name]; old != nil && old.GetMetadata().GetAttempt() > c.GetMetadata().GetAttempt() {
			continue
		}
		st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()})
		if err != nil {
			continue // removed since the list
		}
		v.containers[name] = st.GetStatus()
	}
	return out
}

func (v *podView) readySandbox() bool {
	for _, sb := range v.sandboxes {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return true
		}
	}
	return false
}

func (v *podView) running(name string) bool {
	return v != nil && v.containers[name].GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
}

// summary renders the settled state of the scenario's pods in words that
// must be the same in every mode.
func summary(pods map[string]*podView, crashAttempts uint32) string {
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		v := pods[name]
		var cs []string
		for _, c := range slices.Sorted(maps.Keys(v.containers)) {
			st := v.containers[c]
			switch {
			case name == "crasher":
				cs = append(cs, fmt.Sprintf("%s restarted>=%d", c, crashAttempts))
			case st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED:
				cs = append(cs, fmt.Sprintf("%s exited(%d)", c, st.GetExitCode()))
			default:
				cs = append(cs, c+" "+strings.ToLower(strings.TrimPrefix(st.GetState().String(), "CONTAINER_")))
			}
		}
		lines = append(lines, fmt.Sprintf("%s: sandbox ready=%v; %s", name, v.readySandbox(), strings.Join(cs, ", ")))
	}
	return strings.Join(lines, "\n")
}

// healthWatch checks, at every poll, that the kubelet is alive and healthy:
// /healthz says ok and its PLEG relisted within the kubelet's own
// threshold.
type healthWatch struct {
	t         *testing.T
	k         *kubelethost.Kubelet
	threshold time.Duration
}

func (h healthWatch) check() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.k.Healthz(ctx); err != nil {
		h.t.Fatalf("kubelet healthz: %v", err)
	}
	text, err := h.k.Metrics(ctx)
	if err != nil {
		h.t.Fatalf("kubelet metrics: %v", err)
	}
	samples, err := kubelethost.ParseText(text)
	if err != nil {
		h.t.Fatal(err)
	}
	last, ok := kubelethost.Value(samples, kubelethost.PLEGLastSeenMetric)
	if !ok {
		h.t.Fatalf("kubelet exports no %s", kubelethost.PLEGLastSeenMetric)
	}
	if age := time.Since(time.Unix(int64(last), 0)); age > h.threshold {
		h.t.Fatalf("kubelet PLEG last relisted %v ago: unhealthy", age.Round(time.Second))
	}
}

// pollUntil is waitFor with the health check at every poll.
func pollUntil(t *testing.T, h healthWatch, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	waitFor(t, what, timeout, func() (bool, string) {
		h.check()
		return cond()
	})
}

// shimCaused reports whether a CRI error the kubelet logged can come from
// the shim rather than the runtime: codes the shim itself returns (draining,
// overload, a failed asynchronous sandbox, a duplicate queued sandbox) or
// anything naming it.
func shimCaused(e kubelethost.LogEntry) bool {
	switch e.Code() {
	case "Unavailable", "ResourceExhausted", "DeadlineExceeded", "Internal", "Unimplemented", "AlreadyExists", "InvalidArgument":
		return true
	}
	return strings.Contains(e.Raw, "crishim") || strings.Contains(e.Raw, "waiting for sandbox") ||
		strings.Contains(e.Raw, "is already being created")
}

// runScenario runs the scenario's static pods under the kubelet and waits
// for every state the kubelet must reach; it returns the settled summary
// and the CRI errors the kubelet logged.
func runScenario(t *testing.T, m kubeletMode) (string, []kubelethost.LogEntry) {
	n, k := kubeletOnNode(t, m)
	img := n.PushImage(t, "kubelet/workload")
	h := healthWatch{t: t, k: k, threshold: m.plegThreshold()}
	for _, p := range scenarioPods(img) {
		if err := k.WriteStaticPod(p); err != nil {
			t.Fatal(err)
		}
	}
	// Generous deadlines: two shared, busy cores, three kubelets at once.
	const settle = 4 * time.Minute
	var pods map[string]*podView
	describe := func() string {
		var b strings.Builder
		for name, v := range pods {
			fmt.Fprintf(&b, "  %s: %d sandboxes, ready=%v;", name, len(v.sandboxes), v.readySandbox())
			for c, st := range v.containers {
				fmt.Fprintf(&b, " %s=%v/attempt %d/exit %d", c, st.GetState(), st.GetMetadata().GetAttempt(), st.GetExitCode())
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	pollUntil(t, h, "all pods to start", settle, func() (bool, string) {
		pods = runtimeView(t, n, k)
		init, side, two, crash, doomed := pods["with-init"], pods["with-sidecar"], pods["two-apps"], pods["crasher"], pods["doomed"]
		ok := init != nil && init.containers["setup"].GetState() == runtimeapi.ContainerState_CONTAINER_EXITED &&
			init.containers["setup"].GetExitCode() == 0 && init.running("app") &&
			side.running("proxy") && side.running("app") &&
			two.running("web") && two.running("worker") &&
			crash != nil && crash.containers["crash"] != nil &&
			doomed.running("app")
		return ok, describe()
	})

	// Deleting a manifest: the kubelet stops the pod at once and its
	// container garbage collection, which runs every minute, removes the
	// sandbox.
	if err := k.RemoveStaticPod("doomed"); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, h, "the deleted pod to stop", settle, func() (bool, string) {
		pods = runtimeView(t, n, k)
		d := pods["doomed"]
		return d == nil || (!d.readySandbox() && !d.running("app")), describe()
	})

	first := runtimeView(t, n, k)["crasher"].containers["crash"].GetMetadata().GetAttempt()
	const moreRestarts = 2
	pollUntil(t, h, "the crash-looping container to restart twice more", settle, func() (bool, string) {
		pods = runtimeView(t, n, k)
		c := pods["crasher"].containers["crash"]
		return c.GetMetadata().GetAttempt() >= first+moreRestarts, describe()
	})
	pollUntil(t, h, "the deleted pod's sandbox to be removed", settle, func() (bool, string) {
		pods = runtimeView(t, n, k)
		return pods["doomed"] == nil, describe()
	})
	pods = runtimeView(t, n, k)
	delete(pods, "doomed")
	entries, err := k.Log()
	if err != nil {
		t.Fatal(err)
	}
	if bad := kubelethost.PLEGUnhealthy(entries); len(bad) > 0 {
		t.Errorf("the kubelet reported its PLEG unhealthy %d times; first: %s", len(bad), bad[0].Raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if relist, err := k.Histogram(ctx, kubelethost.RelistDurationMetric); err == nil {
		t.Logf("%s: %v", m.name, relist)
	}
	if m.evented {
		// The evented PLEG falls back to relisting for good after five
		// stream errors; through the shim its stream must hold.
		text, err := k.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		samples, err := kubelethost.ParseText(text)
		if err != nil {
			t.Fatal(err)
		}
		ok, _ := kubelethost.Value(samples, "kubelet_evented_pleg_connection_success_count")
		bad, _ := kubelethost.Value(samples, "kubelet_evented_pleg_connection_error_count")
		t.Logf("%s: evented PLEG stream connections: %v, errors: %v", m.name, ok, bad)
		if ok < 1 || bad > 0 {
			t.Errorf("%s: evented PLEG connected %v times with %v errors, want at least one connection and no error", m.name, ok, bad)
		}
	}
	return summary(pods, moreRestarts), kubelethost.CRIErrors(entries)
}

// TestRealNodeKubeletThroughShim runs the real kubelet's static pods (an
// init container, a native sidecar, two regular containers, a crash loop,
// a deleted manifest) on containerd directly and through the shim in both
// modes (and once more with the kubelet's evented PLEG reading the shim's
// event stream), each on a node of its own, and demands from containerd's
// own lists that every mode reaches the same states, that the kubelet
// stays healthy, and that it logs no CRI error the shim could have caused.
func TestRealNodeKubeletThroughShim(t *testing.T) {
	summaries := make([]string, len(kubeletModes))
	errs := make([][]kubelethost.LogEntry, len(kubeletModes))
	t.Run("modes", func(t *testing.T) {
		for i, m := range kubeletModes {
			t.Run(m.name, func(t *testing.T) {
				t.Parallel()
				summaries[i], errs[i] = runScenario(t, m)
			})
		}
	})
	if t.Failed() {
		return
	}
	// A -run pattern may have selected some modes only.
	ref := slices.IndexFunc(summaries, func(s string) bool { return s != "" })
	if ref < 0 {
		return
	}
	t.Logf("settled state (every mode):\n%s", summaries[ref])
	for i, m := range kubeletModes {
		if summaries[i] == "" {
			continue
		}
		if summaries[i] != summaries[ref] {
			t.Errorf("%s settled differently from %s:\n%s\nvs\n%s", m.name, kubeletModes[ref].name, summaries[i], summaries[ref])
		}
		for _, e := range errs[i] {
			if m.shim != nil && shimCaused(e) {
				t.Errorf("%s: the kubelet logged a CRI error the shim may have caused: %s", m.name, e.Raw)
			}
		}
		t.Logf("%s: %d CRI errors in the kubelet log%s", m.name, len(errs[i]), errorKinds(errs[i]))
	}
}
