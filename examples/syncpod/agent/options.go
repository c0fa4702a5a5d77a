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

// String returns the mode's name.
func (m Mode) String() string { return string(m) }

// Set sets m from its name, "syncpod" or "baseline", so that a Mode is a
// flag.Value (flag.Var(&mode, "mode", ...)).
func (m *Mode) Set(s string) error {
	if err := Mode(s).valid(); err != nil {
		return err
	}
	*m = Mode(s)
	return nil
}

func (m Mode) valid() error {
	switch m {
	case ModeSyncPod, ModeBaseline:
		return nil
	}
	return fmt.Errorf("unknown mode %q (want syncpod or baseline)", string(m))
}

// The kubelet's periods, before TimeScale.
const (
	relistPeriod           = time.Second       // generic PLEG
	relistThreshold        = 3 * time.Minute   // generic PLEG health
	eventedRelistPeriod    = 300 * time.Second // safety net while the event stream is up
	eventedRelistThreshold = 10 * time.Minute  // evented PLEG health
	syncErrorBackoff       = 10 * time.Second  // requeue after a failed sync
	resyncPeriod           = time.Minute       // requeue of a pod nothing woke
	imagePullBackoff       = 10 * time.Second  // first wait after a failed pull
	// expectationTimeout: how long a worker trusts that what it just did
	// will show in the event-fed status before it asks for a pod relist.
	expectationTimeout = 2 * time.Second
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
	crashInitial time.Duration // 0: crashLoopInitial, scaled
	crashMax     time.Duration // 0: crashLoopMax, scaled
	maxGrace     time.Duration // 0: no cap
	statusHook   func(PodStatusUpdate)
	pullOpts     []asyncpull.Option
	podDir       string
	resources    PodResources
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

// WithEventHook calls f for each Event (outside the agent's locks).
func WithEventHook(f func(Event)) Option { return func(c *config) { c.hook = f } }

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

// Node is how the agent's pods sit on the node (WithNode). A zero field
// keeps the default.
type Node struct {
	// IP is every pod's hostIP and, on the node's network, its podIP;
	// httpGet, tcpSocket and gRPC probes and hooks that name no host
	// reach it. Default 127.0.0.1.
	IP string
	// PodNetwork puts pods that are not hostNetwork on the runtime's pod
	// network (its CNI configuration), each with its sandbox's IP, instead
	// of the node's network (the agent sets up no network itself).
	PodNetwork bool
	// PodDir, an absolute path, holds a directory per pod, <dir>/<pod UID>,
	// as the kubelet keeps /var/lib/kubelet/pods: the pod's emptyDir,
	// downwardAPI and projected volumes (volumes/kubernetes.io~empty-dir/<name>,
	// ...) and each container's termination-message file
	// (containers/<name>/<attempt>). A pod's directory is removed once its
	// sandbox is (on delete, RemoveOrphans, Cleanup). Without it the agent
	// makes no directories: a pod with such a volume fails its containers'
	// starts, and containers get no termination-message file; hostPath
	// volumes still work.
	PodDir string
	// PodLogDir gives each sandbox a log directory under it
	// (<dir>/<namespace>_<name>_<uid>) and each container the kubelet's log
	// path in it (<container>/<restart>.log), so that crictl logs and log
	// shippers find the logs. By default containers have no log path.
	PodLogDir string
	// MaxGracePeriod caps every pod's termination grace period (a
	// deletion's, or the spec's). Zero or negative: no cap.
	MaxGracePeriod time.Duration
	// Resources is where the agent gets the configMaps, secrets and
	// service-account tokens its pods reference (see PodResources).
	// Without it a pod that references one fails with that reason, and
	// static pods run as before.
	Resources PodResources
}

// WithNode sets the non-zero fields of n (so several WithNode add up).
func WithNode(n Node) Option {
	return func(c *config) {
		if n.IP != "" {
			c.nodeIP = n.IP
		}
		if n.PodNetwork {
			c.podNetwork = true
		}
		if n.PodDir != "" {
			c.podDir = n.PodDir
		}
		if n.PodLogDir != "" {
			c.podLogDir = n.PodLogDir
		}
		if n.MaxGracePeriod != 0 {
			c.maxGrace = n.MaxGracePeriod
		}
		if n.Resources != nil {
			c.resources = n.Resources
		}
	}
}

// Tuning holds the agent's bounds and periods (WithTuning). A zero field
// keeps the default.
type Tuning struct {
	// TimeScale multiplies every kubelet period (relist, thresholds,
	// crash-loop and pull back-off, resync) to match a simulated runtime
	// whose latencies were scaled by the same factor. Default 1.
	TimeScale float64
	// Metrics registers the agent's Prometheus collectors.
	Metrics prometheus.Registerer
	// PullParallelism caps the background pulls sent to the runtime at
	// once (syncpod mode). Default 3, containerd's max_concurrent_downloads:
	// pulls beyond the runtime's download slots would only wait inside it,
	// in its order rather than the agent's (init images first).
	PullParallelism int
	// StartParallelism caps concurrent container starts per pod (syncpod
	// mode). Default 8.
	StartParallelism int
	// ProbeWorkers is how many probes run at once, over all pods (default
	// 10; negative is refused by New). Probes of every pod share these
	// goroutines; a probe holds one for at most its timeoutSeconds, so ten
	// keep up with hundreds of probes at the usual 10 s period. A probe that
	// comes due while all are busy runs when one frees.
	ProbeWorkers int
	// HealthThreshold overrides the PLEG health threshold (not scaled).
	HealthThreshold time.Duration
	// HealthSampling is how often PLEG health is sampled for Stats, the
	// health metric and the "PLEGHealth" event (not scaled; default a
	// second, or a quarter of a health threshold under 4 s).
	HealthSampling time.Duration
	// SafetyRelist overrides the safety-net relist period of the evented
	// PLEG (not scaled).
	SafetyRelist time.Duration
	// CrashBackOffInitial and CrashBackOffMax set the container restart
	// back-off: initial, doubling to max (default the kubelet's 10 s to
	// 300 s, scaled by TimeScale; these are not scaled).
	CrashBackOffInitial, CrashBackOffMax time.Duration
	// StartAdmission shares a node-wide start admission among this agent's
	// pod workers (and any other user of it): in syncpod mode every
	// RunPodSandbox and every container's create and start waits for a
	// grant, so pods get runtime work in arrival order under a bound that
	// adapts to the runtime's latency, and finish progressively in a
	// CPU-bound burst instead of all at the end. By default a syncpod-mode
	// agent makes its own (an AIMD with its defaults that also reads the
	// node's CPU time, where admission.NodeCPU can) and closes it on Stop.
	// A pod's place in line is when the agent accepted it, on the agent's
	// clock: the controller should read the same clock. The baseline mode
	// never uses it.
	StartAdmission *admission.Controller
	// NoStartAdmission turns start admission off: every pod's work goes
	// to the runtime at once.
	NoStartAdmission bool
	// PullOptions are added to the syncpod-mode pull scheduler's, after
	// the agent's own (its clock, bound, queue policy, back-off and notify).
	PullOptions []asyncpull.Option
}

// WithTuning sets the non-zero fields of t (so several WithTuning add up).
func WithTuning(t Tuning) Option {
	return func(c *config) {
		if t.TimeScale > 0 {
			c.scale = t.TimeScale
		}
		if t.Metrics != nil {
			c.registerer = t.Metrics
		}
		if t.PullParallelism != 0 {
			c.pullParallel = t.PullParallelism
		}
		if t.StartParallelism != 0 {
			c.startParallel = t.StartParallelism
		}
		if t.ProbeWorkers != 0 {
			c.probeWorkers = t.ProbeWorkers
		}
		if t.HealthThreshold != 0 {
			c.healthThreshold = t.HealthThreshold
		}
		if t.HealthSampling > 0 {
			c.sampleEvery = t.HealthSampling
		}
		if t.SafetyRelist != 0 {
			c.safetyRelist = t.SafetyRelist
		}
		if t.CrashBackOffInitial > 0 {
			c.crashInitial = t.CrashBackOffInitial
		}
		if t.CrashBackOffMax > 0 {
			c.crashMax = t.CrashBackOffMax
		}
		if t.StartAdmission != nil {
			c.admission, c.admissionSet = t.StartAdmission, true
		}
		if t.NoStartAdmission {
			c.admission, c.admissionSet = nil, true
		}
		c.pullOpts = append(c.pullOpts, t.PullOptions...)
	}
}

func (c *config) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.scale)
}

// plegThreshold is the PLEG's health threshold: the one set, else the
// kubelet's 3 minutes, scaled.
func (c *config) plegThreshold() time.Duration {
	if c.healthThreshold > 0 {
		return c.healthThreshold
	}
	return c.scaled(relistThreshold)
}

// Defaults of Tuning's bounds.
const (
	// defaultPullParallelism: containerd's default max_concurrent_downloads.
	defaultPullParallelism = 3
	// defaultProbeWorkers: a probe holds a worker for at most its timeout
	// (1 s by default), so ten keep up with hundreds of probes at 10 s.
	defaultProbeWorkers = 10
	// defaultHealthSampling: health changes on the scale of the thresholds
	// (minutes), so a second is precise enough, and an idle agent wakes no
	// more often than that.
	defaultHealthSampling = time.Second
)

// pullPriorityAging is the queue wait (scaled by TimeScale) worth one
// priority level, so regular containers' images never starve behind a
// stream of init images.
const pullPriorityAging = 10 * time.Second
