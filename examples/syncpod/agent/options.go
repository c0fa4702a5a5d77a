package agent

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/concurrentstart/admission"
)

// Mode selects how the agent runs pods.
type Mode string

const (
	// ModeSyncPod composes syncpod's building blocks: background pulls that
	// wake the worker, concurrent starts, evented PLEG with on-demand
	// inspection and a relist safety net.
	ModeSyncPod Mode = "syncpod"
	// ModeBaseline runs pods the way today's kubelet does: serialized pulls
	// that block the worker, containers started one after another, a 1 s
	// relist PLEG, and each sync waiting for a relist newer than the last.
	ModeBaseline Mode = "baseline"
)

// ParseMode parses "syncpod" or "baseline".
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeSyncPod, ModeBaseline:
		return Mode(s), nil
	}
	return "", fmt.Errorf("unknown mode %q (want syncpod or baseline)", s)
}

// The kubelet's periods, before TimeScale.
const (
	RelistPeriod           = time.Second       // generic PLEG
	RelistThreshold        = 3 * time.Minute   // generic PLEG health
	EventedRelistPeriod    = 300 * time.Second // safety net while the event stream is up
	EventedRelistThreshold = 10 * time.Minute  // evented PLEG health
	SyncErrorBackoff       = 10 * time.Second  // requeue after a failed sync
	ResyncPeriod           = time.Minute       // requeue of a pod nothing woke
	ImagePullBackoff       = 10 * time.Second  // first wait after a failed pull
	// ExpectationTimeout: how long a worker trusts that what it just did
	// will show in the event-fed status before it asks for a pod relist.
	ExpectationTimeout = 2 * time.Second
)

// Option configures an Agent.
type Option func(*config)

type config struct {
	mode            Mode
	clock           clock.WithTickerAndDelayedExecution
	log             *zap.Logger
	scale           float64
	registerer      prometheus.Registerer
	pullParallel    int
	startParallel   int
	healthThreshold time.Duration
	safetyRelist    time.Duration
	hook            func(Event)
	sampleEvery     time.Duration
	admission       *admission.Controller
	admissionSet    bool
	probeWorkers    int

	nodeIP       string
	podNetwork   bool
	podLogDir    string
	crashInitial time.Duration // 0: CrashLoopInitial, scaled
	crashMax     time.Duration // 0: CrashLoopMax, scaled
	maxGrace     time.Duration // 0: no cap
	statusHook   func(PodStatusUpdate)
	pullOpts     []asyncpull.Option
	podDir       string
}

// WithMode selects ModeSyncPod (default) or ModeBaseline.
func WithMode(m Mode) Option { return func(c *config) { c.mode = m } }

// WithClock injects the clock for back-offs, requeues, periods and
// latencies (tests use a fake clock).
func WithClock(clk clock.WithTickerAndDelayedExecution) Option {
	return func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	}
}

// WithLogger sets the logger (default zap.NewNop).
func WithLogger(l *zap.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// WithTimeScale multiplies every kubelet period (relist, thresholds,
// crash-loop and pull back-off, resync) by f, to match a simulated runtime
// whose latencies were scaled by the same factor. Default 1.
func WithTimeScale(f float64) Option {
	return func(c *config) {
		if f > 0 {
			c.scale = f
		}
	}
}

// WithMetrics registers the agent's Prometheus collectors with r.
func WithMetrics(r prometheus.Registerer) Option { return func(c *config) { c.registerer = r } }

// DefaultPullParallelism is the default cap on pulls sent to the runtime at
// once (syncpod mode): containerd's default max_concurrent_downloads. Pulls
// beyond the runtime's download slots would only wait inside it, in its
// order rather than the agent's (init images first); set it to the
// runtime's value with WithPullParallelism.
const DefaultPullParallelism = 3

// PullPriorityAging is the queue wait (scaled by WithTimeScale) worth one
// priority level, so regular containers' images never starve behind a
// stream of init images.
const PullPriorityAging = 10 * time.Second

// WithPullParallelism caps concurrent background pulls (syncpod mode,
// default DefaultPullParallelism).
func WithPullParallelism(n int) Option { return func(c *config) { c.pullParallel = n } }

// WithStartParallelism caps concurrent container starts per pod (syncpod mode).
func WithStartParallelism(n int) Option { return func(c *config) { c.startParallel = n } }

// WithHealthThreshold overrides the PLEG health threshold (after scaling
// is not applied to it).
func WithHealthThreshold(d time.Duration) Option { return func(c *config) { c.healthThreshold = d } }

// WithSafetyRelist overrides the safety-net relist period of the evented
// PLEG (not scaled).
func WithSafetyRelist(d time.Duration) Option { return func(c *config) { c.safetyRelist = d } }

// WithEventHook calls f for each Event (outside the agent's locks).
func WithEventHook(f func(Event)) Option { return func(c *config) { c.hook = f } }

// DefaultHealthSampling is how often an agent samples PLEG health by
// default at the kubelet's thresholds. Health changes on the scale of the
// thresholds (minutes), so a second is precise enough, and an idle agent
// wakes no more often than that. A health threshold under 4 s is sampled
// four times per threshold instead.
const DefaultHealthSampling = time.Second

// WithHealthSampling sets how often PLEG health is sampled for Stats, the
// health metric and EventHealth (default: DefaultHealthSampling, or a
// quarter of a shorter health threshold; not scaled). A benchmark that integrates unhealthy time over a short stall
// samples more often; zero or negative keeps the default.
func WithHealthSampling(d time.Duration) Option { return func(c *config) { c.sampleEvery = d } }

func (c *config) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.scale)
}

// WithPodDir sets the directory, an absolute path, under which the agent
// keeps a directory per pod, <dir>/<pod UID>, as the kubelet keeps
// /var/lib/kubelet/pods: the pod's emptyDir, downwardAPI and projected
// volumes (volumes/kubernetes.io~empty-dir/<name>, ...) and each
// container's termination-message file (containers/<name>/<attempt>).
// The syncpod command uses DefaultPodDir. A pod's directory is removed
// once its sandbox is (on delete, RemoveOrphans, Cleanup). Without it
// (the default) the agent makes no directories: a pod with such a volume
// fails its containers' starts with a *VolumeError, and containers get no
// termination-message file; hostPath volumes still work.
func WithPodDir(dir string) Option { return func(c *config) { c.podDir = dir } }

// WithStartAdmission shares ctl, a node-wide start admission, among this
// agent's pod workers (and any other user of ctl): in syncpod mode every
// RunPodSandbox and every container's create and start waits for a grant,
// so pods get runtime work in arrival order under a bound that adapts to
// the runtime's latency, and finish progressively in a CPU-bound burst
// instead of all at the end. By default a syncpod-mode agent makes its own
// (an AIMD with its defaults that also reads the node's CPU time, where
// admission.NodeCPU can, so that the bound stops growing once the cores
// are busy) and closes it on Stop; nil turns
// admission off (every pod's work goes to the runtime at once). The
// baseline mode never uses it. A pod's place in line is when the agent
// accepted it, on the agent's clock: ctl should read the same clock
// (admission.WithClock; both default to the real one).
func WithStartAdmission(ctl *admission.Controller) Option {
	return func(c *config) { c.admission, c.admissionSet = ctl, true }
}

// DefaultProbeWorkers is how many probes an agent runs at once by
// default. Probes of every pod share these goroutines; a probe holds one
// for at most its timeoutSeconds (1 s by default), so ten keep up with
// hundreds of probes at the usual 10 s period, and a probe that times out
// delays others by at most its timeout.
const DefaultProbeWorkers = 10

// WithProbeWorkers sets how many probes run at once, over all pods
// (default DefaultProbeWorkers; 0 keeps the default; negative is refused
// by New). A probe that comes due while all are busy runs when one frees.
func WithProbeWorkers(n int) Option { return func(c *config) { c.probeWorkers = n } }

// WithNodeIP sets the node's IP: every pod's hostIP and, as the agent's
// pods use the node's network, its podIP; httpGet, tcpSocket and gRPC
// probes and hooks that name no host reach it (default DefaultNodeIP).
func WithNodeIP(ip string) Option { return func(c *config) { c.nodeIP = ip } }

// WithPodNetwork puts pods that are not hostNetwork on the runtime's pod
// network (its CNI configuration), each with its sandbox's IP, instead of
// the node's network, the default (the agent sets up no network itself).
func WithPodNetwork() Option { return func(c *config) { c.podNetwork = true } }

// WithPodLogDir gives each sandbox a log directory under dir
// (dir/<namespace>_<name>_<uid>) and each container the kubelet's log
// path in it (<container>/<restart>.log), so that crictl logs and log
// shippers find the logs. By default containers have no log path.
func WithPodLogDir(dir string) Option { return func(c *config) { c.podLogDir = dir } }

// WithCrashBackOff sets the container restart back-off: initial, doubling
// to maxDelay (default the kubelet's 10 s to 300 s, scaled by
// WithTimeScale; these are not scaled). Non-positive values keep the
// default.
func WithCrashBackOff(initial, maxDelay time.Duration) Option {
	return func(c *config) { c.crashInitial, c.crashMax = initial, maxDelay }
}

// WithMaxGracePeriod caps every pod's termination grace period (a
// deletion's, or the spec's). Zero or negative: no cap.
func WithMaxGracePeriod(d time.Duration) Option { return func(c *config) { c.maxGrace = d } }

// WithPodStatusHook calls f with a copy of a pod, its status the
// corev1.PodStatus the agent reports (Agent.Pod), whenever that status
// changes, and once more, Final, with the terminal status (Succeeded or Failed,
// every container terminated, the deletion's timestamp) when a deleted pod
// has been stopped. f is called from one goroutine, outside the agent's
// locks, so it may call the agent; statuses of one pod coalesce (the
// latest wins) and arrive in order, so a slow f delays but never loses an
// update. Without it the agent computes no status unless asked.
func WithPodStatusHook(f func(PodStatusUpdate)) Option { return func(c *config) { c.statusHook = f } }

// PodStatusUpdate is one delivery of WithPodStatusHook.
type PodStatusUpdate struct {
	// Pod is a copy of the pod as last applied, with the status the agent
	// reports; the callee may keep or change it.
	Pod *corev1.Pod
	// Final says Pod was deleted and is stopped: this is its terminal
	// status, and the last update of the pod.
	Final bool
}

// WithPullOptions adds options to the syncpod-mode pull scheduler, after
// the agent's own (its clock, bound, queue policy, back-off and notify).
func WithPullOptions(opts ...asyncpull.Option) Option {
	return func(c *config) { c.pullOpts = append(c.pullOpts, opts...) }
}
