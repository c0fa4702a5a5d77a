package provider

import (
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/pleg"
)

// Defaults of the provider's own knobs.
const (
	// DefaultErrorResync is how soon a pod whose last sync failed (an image
	// pull, a create or start error) is synced again: soon enough for the
	// status to move from ErrImagePull to ImagePullBackOff as a kubectl user
	// expects, while the back-offs decide when the next attempt really runs.
	DefaultErrorResync = 2 * time.Second
	// DefaultCrashBackOffInitial and DefaultCrashBackOffMax are the kubelet's
	// container restart back-off: 10s doubling to 300s.
	DefaultCrashBackOffInitial = 10 * time.Second
	DefaultCrashBackOffMax     = 300 * time.Second
	// DefaultGracePeriod is the stop grace period of a pod that names none.
	DefaultGracePeriod = 30 * time.Second
	// DefaultMaxParallelStarts bounds the container starts of one pod in flight.
	DefaultMaxParallelStarts = 8
)

// Option configures a Provider.
type Option func(*config)

type config struct {
	clock             clock.Clock
	logger            *zap.Logger
	nodeName          string
	nodeIP            string
	podLogDir         string
	errorResync       time.Duration
	crashInitial      time.Duration
	crashMax          time.Duration
	maxGrace          time.Duration
	maxParallelStarts int
	pullOpts          []asyncpull.Option
	plegOpts          []pleg.Option
}

func defaultConfig() config {
	return config{
		clock:             clock.RealClock{},
		logger:            zap.NewNop(),
		errorResync:       DefaultErrorResync,
		crashInitial:      DefaultCrashBackOffInitial,
		crashMax:          DefaultCrashBackOffMax,
		maxGrace:          DefaultGracePeriod,
		maxParallelStarts: DefaultMaxParallelStarts,
	}
}

// WithClock sets the clock for back-offs, resyncs and status times (default
// the real clock). It is not passed to the PLEG or the pull scheduler; give
// them their own with WithPLEGOptions and WithPullOptions.
func WithClock(c clock.Clock) Option { return func(cfg *config) { cfg.clock = c } }

// WithLogger sets the logger (default: no-op).
func WithLogger(l *zap.Logger) Option { return func(cfg *config) { cfg.logger = l } }

// WithNodeName names the node in the provider's logs.
func WithNodeName(name string) Option { return func(cfg *config) { cfg.nodeName = name } }

// WithNodeIP sets the node's IP: the pods' hostIP, and the podIP of
// hostNetwork pods.
func WithNodeIP(ip string) Option { return func(cfg *config) { cfg.nodeIP = ip } }

// WithPodLogDir sets the directory under which each pod gets its log
// directory (<dir>/<namespace>_<name>_<uid>, as the kubelet's
// /var/log/pods). Empty (default) gives pods no log directory.
func WithPodLogDir(dir string) Option { return func(cfg *config) { cfg.podLogDir = dir } }

// WithErrorResync sets how soon a pod whose sync failed is synced again
// (default DefaultErrorResync).
func WithErrorResync(d time.Duration) Option { return func(cfg *config) { cfg.errorResync = d } }

// WithCrashBackOff sets the container restart back-off (default 10s
// doubling to 300s).
func WithCrashBackOff(initial, maxDelay time.Duration) Option {
	return func(cfg *config) { cfg.crashInitial, cfg.crashMax = initial, maxDelay }
}

// WithMaxGracePeriod caps the stop grace period used when a pod is deleted
// (default DefaultGracePeriod).
func WithMaxGracePeriod(d time.Duration) Option { return func(cfg *config) { cfg.maxGrace = d } }

// WithMaxParallelStarts bounds how many of one pod's containers are being
// created and started at once (default DefaultMaxParallelStarts).
func WithMaxParallelStarts(n int) Option { return func(cfg *config) { cfg.maxParallelStarts = n } }

// WithPullOptions passes options to the asyncpull scheduler (parallelism,
// QPS, back-off, clock ...). Give it the provider's clock if you give the
// provider one: pull back-off ends are waited for on the provider's clock.
func WithPullOptions(opts ...asyncpull.Option) Option {
	return func(cfg *config) { cfg.pullOpts = append(cfg.pullOpts, opts...) }
}

// WithPLEGOptions passes options to the PLEG (relist period, event stream,
// clock ...).
func WithPLEGOptions(opts ...pleg.Option) Option {
	return func(cfg *config) { cfg.plegOpts = append(cfg.plegOpts, opts...) }
}
