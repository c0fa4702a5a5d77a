package crisim

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/typednil"
)

// Option configures a Runtime (and the Server that serves it).
type Option func(*config)

// DefaultEventBuffer is the number of events buffered per GetContainerEvents
// subscriber, the same as containerd 2.x. A subscriber whose buffer is full
// loses the event (see EventsLost).
const DefaultEventBuffer = 100

type config struct {
	seed           int64
	clock          clock.WithDelayedExecution
	latencies      map[string]Latency
	maxConcurrency int
	storeLock      bool
	images         map[string]int64
	registry       map[string]int64
	registryAuth   map[string][2]string // ref -> username, password (WithRegistryAuth)
	bandwidth      int64
	maxDownloads   int
	eventBuffer    int
	stopExitCode   int32
	runtimeName    string
	runtimeVersion string
	cpu            *cpuModel    // WithCPU; nil: no CPU limit
	err            *ConfigError // the first bad option
}

// fail records the first bad option; later ones are not reported, so the
// error names the option the caller has to fix first.
func (c *config) fail(option, format string, args ...any) {
	if c.err == nil {
		c.err = &ConfigError{Option: option, Reason: fmt.Sprintf(format, args...)}
	}
}

func defaultConfig() *config {
	return &config{
		seed:           1,
		clock:          clock.RealClock{},
		latencies:      map[string]Latency{},
		images:         map[string]int64{},
		registry:       map[string]int64{},
		eventBuffer:    DefaultEventBuffer,
		runtimeName:    "crisim",
		runtimeVersion: "0.1.0",
	}
}

// WithSeed seeds the random source behind latency distributions, error rates
// and generated ids. The default seed is 1. A sequential run repeats exactly;
// concurrent calls draw the same sequence of samples, handed out in the
// order the calls arrive.
func WithSeed(seed int64) Option { return func(c *config) { c.seed = seed } }

// WithClock injects the clock used for timestamps, latencies, pull times,
// stalls and scripted container exits. Tests use
// k8s.io/utils/clock/testing.NewFakeClock and step it; with a fake clock a
// non-zero latency waits until the clock is stepped past it.
func WithClock(c clock.WithDelayedExecution) Option {
	return func(cfg *config) {
		if c == nil || typednil.Is(c) {
			cfg.fail("WithClock", "must not be nil")
			return
		}
		cfg.clock = c
	}
}

// WithLatency sets the latency of one CRI method, named as in the CRI service
// ("RunPodSandbox", "ListContainers", "PullImage", ...). It overrides any
// earlier setting for that method, including WithRealisticLatencies. A nil
// Latency removes the setting. A Fixed, Uniform or LogNormal made with a
// negative duration, and a typed-nil Latency (a nil LatencyFunc), are a
// *ConfigError.
func WithLatency(method string, l Latency) Option {
	return func(c *config) {
		if l == nil {
			delete(c.latencies, method)
			return
		}
		if reason := latencyProblem(l); reason != "" {
			c.fail("WithLatency", "%s: %s", method, reason)
			return
		}
		c.latencies[method] = l
	}
}

// WithRealisticLatencies sets every modelled method to a seeded log-normal
// latency in the range containerd 2.x with runc shows on a small node with
// host networking (see RealisticLatencies). Later WithLatency options override
// single methods.
func WithRealisticLatencies() Option {
	return func(c *config) {
		for m, l := range RealisticLatencies() {
			c.latencies[m] = l
		}
	}
}

// WithMaxConcurrency caps how many unary calls the runtime works on at once,
// across all methods; further calls queue (honouring their context) until a
// slot frees. 0 means no cap (the default); a negative n is a *ConfigError.
// Event streams do not count.
func WithMaxConcurrency(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.fail("WithMaxConcurrency", "%d is negative", n)
			return
		}
		c.maxConcurrency = n
	}
}

// WithStoreLock turns on the store-lock model: sandbox and container
// mutations (Run/Stop/RemovePodSandbox, Create/Start/Stop/RemoveContainer)
// hold the metadata store for their whole latency (not for the CPU work
// WithCPU adds after it, which is runc's), and ListPodSandbox and
// ListContainers need it free of mutations. Mutations share the store with
// each other, and so do Lists; the lock is phase-fair: a List waits for the
// mutations in flight when it arrived (mutations arriving after it wait for
// it), then all waiting Lists run together. This is what makes List latency
// climb to the latency of the slowest RunPodSandbox during a pod-creation
// burst, as on containerd. Status calls and image calls do not take it.
func WithStoreLock() Option { return func(c *config) { c.storeLock = true } }

// WithImage makes an image already present on the node. ref is normalised
// like the kubelet does ("busybox" is "docker.io/library/busybox:latest").
// The image is also pullable. An empty ref or a negative size is a
// *ConfigError.
func WithImage(ref string, size int64) Option {
	return func(c *config) {
		if arg, reason := imageProblem(ref, size); arg != "" {
			c.fail("WithImage", "%s %s", arg, reason)
			return
		}
		c.images[ref] = size
		c.registry[ref] = size
	}
}

// WithRegistryImage makes an image pullable (but not present): PullImage
// takes size/bandwidth (see WithPullBandwidth) and then the image is present.
// An empty ref or a negative size is a *ConfigError.
func WithRegistryImage(ref string, size int64) Option {
	return func(c *config) {
		if arg, reason := imageProblem(ref, size); arg != "" {
			c.fail("WithRegistryImage", "%s %s", arg, reason)
			return
		}
		c.registry[ref] = size
	}
}

// WithRegistryAuth makes the registry ask for credentials for ref (added
// with WithRegistryImage): a PullImage of it whose AuthConfig does not
// carry username and password (as Username and Password, or as Auth,
// base64 of "username:password") fails with codes.Unauthenticated, as a
// registry's "401 Unauthorized" fails containerd's pull. An empty ref or
// username is a *ConfigError.
func WithRegistryAuth(ref, username, password string) Option {
	return func(c *config) {
		if ref == "" || username == "" {
			c.fail("WithRegistryAuth", "ref and username must not be empty")
			return
		}
		if c.registryAuth == nil {
			c.registryAuth = map[string][2]string{}
		}
		c.registryAuth[ref] = [2]string{username, password}
	}
}

// WithPullBandwidth sets the download speed of each image pull in bytes per
// second. 0 (the default) makes downloads instant; a negative value is a
// *ConfigError.
func WithPullBandwidth(bytesPerSec int64) Option {
	return func(c *config) {
		if bytesPerSec < 0 {
			c.fail("WithPullBandwidth", "%d is negative", bytesPerSec)
			return
		}
		c.bandwidth = bytesPerSec
	}
}

// WithMaxConcurrentDownloads caps how many image downloads run at once
// (containerd's max_concurrent_downloads, default 3 there). Further pulls
// queue. 0 means no cap (the default); a negative n is a *ConfigError.
func WithMaxConcurrentDownloads(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.fail("WithMaxConcurrentDownloads", "%d is negative", n)
			return
		}
		c.maxDownloads = n
	}
}

// WithEventBuffer sets the per-subscriber event buffer (0 means
// DefaultEventBuffer; a negative n is a *ConfigError).
func WithEventBuffer(n int) Option {
	return func(c *config) {
		switch {
		case n < 0:
			c.fail("WithEventBuffer", "%d is negative", n)
		case n == 0:
			c.eventBuffer = DefaultEventBuffer
		default:
			c.eventBuffer = n
		}
	}
}

// WithStopExitCode sets the exit code of containers stopped by StopContainer,
// StopPodSandbox or RemoveContainer (default 0: the workload handles SIGTERM).
// The AnnotationStopExitCode annotation overrides it per container.
func WithStopExitCode(code int32) Option { return func(c *config) { c.stopExitCode = code } }

// WithVersion sets the runtime name and version reported by Version.
func WithVersion(name, version string) Option {
	return func(c *config) {
		c.runtimeName = name
		c.runtimeVersion = version
	}
}

// RealisticLatencies returns the latency table WithRealisticLatencies uses:
// log-normal distributions (median, p99) of the order containerd 2.x with runc
// shows on a 2-core node with host networking and no CNI. They are a model,
// not a measurement of any machine; use them to make contention visible.
func RealisticLatencies() map[string]Latency {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	return map[string]Latency{
		"Version":          LogNormal(ms(0.2), ms(1)),
		"Status":           LogNormal(ms(0.3), ms(2)),
		"RunPodSandbox":    LogNormal(ms(120), ms(400)),
		"StopPodSandbox":   LogNormal(ms(40), ms(150)),
		"RemovePodSandbox": LogNormal(ms(20), ms(80)),
		"PodSandboxStatus": LogNormal(ms(1), ms(5)),
		"ListPodSandbox":   LogNormal(ms(2), ms(10)),
		"CreateContainer":  LogNormal(ms(30), ms(120)),
		"StartContainer":   LogNormal(ms(60), ms(250)),
		"StopContainer":    LogNormal(ms(25), ms(100)),
		"RemoveContainer":  LogNormal(ms(15), ms(60)),
		"ListContainers":   LogNormal(ms(2), ms(10)),
		"ContainerStatus":  LogNormal(ms(1), ms(5)),
		"ExecSync":         LogNormal(ms(15), ms(60)),
		"ListImages":       LogNormal(ms(2), ms(10)),
		"ImageStatus":      LogNormal(ms(1), ms(5)),
		"PullImage":        LogNormal(ms(20), ms(80)),
		"RemoveImage":      LogNormal(ms(10), ms(40)),
		"ImageFsInfo":      LogNormal(ms(1), ms(5)),
	}
}
