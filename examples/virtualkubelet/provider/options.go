package provider

import (
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

// Defaults of the provider's own knobs.
const (
	// DefaultCrashBackOffInitial and DefaultCrashBackOffMax are the kubelet's
	// container restart back-off: 10s doubling to 300s.
	DefaultCrashBackOffInitial = 10 * time.Second
	DefaultCrashBackOffMax     = 300 * time.Second
	// DefaultGracePeriod caps the stop grace period of every pod by
	// default: the kubelet's default terminationGracePeriodSeconds.
	DefaultGracePeriod = 30 * time.Second
	// DefaultMaxParallelStarts bounds the container starts of one pod in flight.
	DefaultMaxParallelStarts = 8
)

// Option configures a Provider.
type Option func(*config)

type config struct {
	clock             clock.WithTickerAndDelayedExecution
	logger            *zap.Logger
	nodeName          string
	nodeIP            string
	podLogDir         string
	podDir            string
	crashInitial      time.Duration
	crashMax          time.Duration
	maxGrace          time.Duration
	maxParallelStarts int
	pullOpts          []asyncpull.Option
	agentOpts         []agent.Option
	kube              kubernetes.Interface
}

func defaultConfig() config {
	return config{
		clock:             clock.RealClock{},
		logger:            zap.NewNop(),
		crashInitial:      DefaultCrashBackOffInitial,
		crashMax:          DefaultCrashBackOffMax,
		maxGrace:          DefaultGracePeriod,
		maxParallelStarts: DefaultMaxParallelStarts,
	}
}

// WithClock sets the clock of everything time-based in the provider's
// agent: back-offs, resyncs, the PLEG, the pull scheduler and status times
// (default the real clock).
func WithClock(c clock.WithTickerAndDelayedExecution) Option {
	return func(cfg *config) { cfg.clock = c }
}

// WithLogger sets the logger (default zap.NewNop).
func WithLogger(l *zap.Logger) Option { return func(cfg *config) { cfg.logger = l } }

// WithNodeName names the node in logs.
func WithNodeName(name string) Option { return func(cfg *config) { cfg.nodeName = name } }

// WithNodeIP sets the node's IP: every pod's hostIP, and the podIP of
// hostNetwork pods.
func WithNodeIP(ip string) Option { return func(cfg *config) { cfg.nodeIP = ip } }

// WithPodLogDir puts each pod's logs under dir as the kubelet does
// (dir/<namespace>_<name>_<uid>/<container>/<restart>.log), so crictl
// logs and log shippers find them. Without it containers have no log path.
func WithPodLogDir(dir string) Option { return func(cfg *config) { cfg.podLogDir = dir } }

// WithPodDir keeps the pods' volumes (emptyDir, downwardAPI, projected)
// and termination-message files under dir, as agent.Node.PodDir. Without
// it a pod with such a volume fails to start with a clear reason.
func WithPodDir(dir string) Option { return func(cfg *config) { cfg.podDir = dir } }

// WithCrashBackOff sets the container restart back-off: initial, doubling
// to maxDelay (default 10s to 300s).
func WithCrashBackOff(initial, maxDelay time.Duration) Option {
	return func(cfg *config) { cfg.crashInitial, cfg.crashMax = initial, maxDelay }
}

// WithMaxGracePeriod caps the grace period containers get to stop
// (default DefaultGracePeriod); a pod's own shorter one, or its
// deletion's, wins.
func WithMaxGracePeriod(d time.Duration) Option { return func(cfg *config) { cfg.maxGrace = d } }

// WithMaxParallelStarts bounds the container starts of one pod in flight
// (default DefaultMaxParallelStarts).
func WithMaxParallelStarts(n int) Option { return func(cfg *config) { cfg.maxParallelStarts = n } }

// WithPullOptions passes options to the agent's asyncpull scheduler
// (parallelism, QPS, back-off ...), after the agent's own.
func WithPullOptions(opts ...asyncpull.Option) Option {
	return func(cfg *config) { cfg.pullOpts = append(cfg.pullOpts, opts...) }
}

// WithAgentOptions passes options to the agent the provider runs pods
// with (its mode, admission, probes ...), after the provider's own.
func WithAgentOptions(opts ...agent.Option) Option {
	return func(cfg *config) { cfg.agentOpts = append(cfg.agentOpts, opts...) }
}

// WithKubeClient gives the pods the API objects they reference through
// kube (see Resources): configMap, secret and projected volumes (the
// kube-api-access-* volume every pod of a cluster with ServiceAccount
// admission gets), env from configMaps and secrets, imagePullSecrets and
// service-account tokens. The node needs to get, list and watch the
// configMaps and secrets of its pods and to create their service
// accounts' tokens, as the node authorizer lets a kubelet. Without it a
// pod that references such an object fails to start with a reason that
// says the API server is needed. A nil kube is ignored.
func WithKubeClient(kube kubernetes.Interface) Option {
	return func(cfg *config) {
		if kube != nil {
			cfg.kube = kube
		}
	}
}
