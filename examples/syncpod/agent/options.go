package agent

import (
	"fmt"
	"github.com/syncpod/syncpod/concurrentstart/admission"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/utils/clock"
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
	nodeIP          string
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

// WithStartAdmission shares ctl, a node-wide start admission, among this
// agent's pod workers (and any other user of ctl): in syncpod mode every
// RunPodSandbox and every container's create and start waits for a grant,
// so pods get runtime work in arrival order under a bound that adapts to
// the runtime's latency, and finish progressively in a CPU-bound burst
// instead of all at the end. By default a syncpod-mode agent makes its own
// (admission.New with its defaults) and closes it on Stop; nil turns
// admission off (every pod's work goes to the runtime at once). The
// baseline mode never uses it.
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

// WithNodeIP sets the address httpGet, tcpSocket and gRPC probes and hooks
// reach when they name no host (the pod's IP, which for the agent's pods,
// on the node's network, is the node's). Default DefaultNodeIP.
func WithNodeIP(ip string) Option { return func(c *config) { c.nodeIP = ip } }
