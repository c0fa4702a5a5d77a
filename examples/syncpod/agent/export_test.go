package agent

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
)

// Quiescent exposes quiescent to the external tests.
func (a *Agent) Quiescent() bool { return a.quiescent() }

// ProbeState exposes probeState to the external tests.
func (a *Agent) ProbeState(uid types.UID, name, id string) (started, ready bool) {
	return a.probeState(uid, name, id)
}

// CheckHostPath exposes checkHostPath to the external tests.
var CheckHostPath = checkHostPath

// SandboxConfig is the sandbox config the agent sends on the node's
// network, for tests that make a sandbox the agent then finds.
func SandboxConfig(pod *corev1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	return sandboxConfig(pod, attempt, podcri.WithNodeNetwork())
}

// VolumeError exposes volumeError to the external tests.
type VolumeError = volumeError

// EventType is Event.Type, for the external tests' helpers.
type EventType = string

// The event types, periods and report states, for the external tests.
const (
	EventSandbox             = eventSandbox
	EventStarted             = eventStarted
	EventStartError          = eventStartError
	EventKilled              = eventKilled
	EventKilling             = eventKilling
	EventBackOff             = eventBackOff
	EventRunning             = eventRunning
	EventHealth              = eventHealth
	EventSynced              = eventSynced
	EventUnhealthy           = eventUnhealthy
	EventFailedPreStopHook   = eventFailedPreStopHook
	EventFailedPostStartHook = eventFailedPostStartHook

	RelistPeriod = relistPeriod

	SyncErrorBackoff   = syncErrorBackoff
	RuntimeRetryPeriod = runtimeRetryPeriod

	PodPending = reportPending
	PodRunning = reportRunning
)

// The single-setting options the tests use, over WithTuning and WithNode.

func WithTimeScale(f float64) Option               { return WithTuning(Tuning{TimeScale: f}) }
func WithPullParallelism(n int) Option             { return WithTuning(Tuning{PullParallelism: n}) }
func WithStartParallelism(n int) Option            { return WithTuning(Tuning{StartParallelism: n}) }
func WithProbeWorkers(n int) Option                { return WithTuning(Tuning{ProbeWorkers: n}) }
func WithHealthThreshold(d time.Duration) Option   { return WithTuning(Tuning{HealthThreshold: d}) }
func WithHealthSampling(d time.Duration) Option    { return WithTuning(Tuning{HealthSampling: d}) }
func WithSafetyRelist(d time.Duration) Option      { return WithTuning(Tuning{SafetyRelist: d}) }
func WithPodDir(dir string) Option                 { return WithNode(Node{PodDir: dir}) }
func WithNodeIP(ip string) Option                  { return WithNode(Node{IP: ip}) }
func (a *Agent) PLEGHealth() (bool, error, string) { return a.plegHealth() }
func WithPodResources(src PodResources) Option     { return WithNode(Node{Resources: src}) }
