package main

import (
	"context"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	criapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/clock"
)

// How often the node status is looked at. The agent's health is read
// every healthPollPeriod (it is the agent's cached verdict, no runtime
// call), so a change of Ready is pushed within a second of the agent
// seeing it. The host's figures and the runtime's Version are read every
// statusRefreshPeriod, the kubelet's nodeStatusUpdateFrequency, and the
// Version is bounded by versionTimeout: an idle node adds one runtime call
// per 10 s. A change only of condition messages (a runtime "not answered
// for 12s", then 13s) is pushed at most once per statusRefreshPeriod.
const (
	healthPollPeriod    = time.Second
	statusRefreshPeriod = 10 * time.Second
	versionTimeout      = 5 * time.Second
)

// nodeStatus is the virtual node's node.NodeProvider: it builds the node
// status (buildStatus) and pushes it to virtual-kubelet's node controller
// whenever it changes. Use newNodeStatus.
//
// Ping answers while the process runs, as the kubelet renews its Lease
// whatever the runtime's health: a runtime that is down turns Ready False
// with its message (the node.kubernetes.io/not-ready taint), rather than
// letting the Lease lapse (node.kubernetes.io/unreachable, Ready Unknown,
// and a status that says nothing). virtual-kubelet renews neither the
// Lease nor the status while Ping fails.
type nodeStatus struct {
	clk     clock.WithTicker
	cfg     statusConfig
	health  func() error                               // the agent's health, nil when healthy
	version func(context.Context) (runtimeInfo, error) // the runtime's CRI Version
	facts   func() hostFacts                           // the host's figures
	logger  *zap.Logger

	mu          sync.Mutex
	base        *corev1.Node      // the node as registered: metadata and spec
	last        corev1.NodeStatus // the status last pushed (or registered)
	rt          runtimeInfo
	host        hostFacts
	healthy     bool
	refreshedAt time.Time // host figures and version last read
	pushedAt    time.Time
}

var _ node.NodeProvider = (*nodeStatus)(nil)

// newNodeStatus returns the node status of a node configured by cfg. rt
// is the runtime's version as already read, h the host's figures.
func newNodeStatus(cfg statusConfig, clk clock.WithTicker, logger *zap.Logger, health func() error,
	version func(context.Context) (runtimeInfo, error), facts func() hostFacts, rt runtimeInfo, h hostFacts) *nodeStatus {
	return &nodeStatus{clk: clk, cfg: cfg, health: health, version: version, facts: facts, logger: logger,
		rt: rt, host: h, refreshedAt: clk.Now()}
}

// criVersion returns the runtime's Version as a runtimeInfo.
func criVersion(rt criapi.RuntimeService) func(context.Context) (runtimeInfo, error) {
	return func(ctx context.Context) (runtimeInfo, error) {
		v, err := rt.Version(ctx, "v1")
		if err != nil {
			return runtimeInfo{}, err
		}
		return runtimeInfo{Name: v.GetRuntimeName(), Version: v.GetRuntimeVersion()}, nil
	}
}

// register sets n's status to the current one and keeps n's metadata and
// spec for the later pushes. Call it once, from nodeutil.NewNode's
// callback, before the node controller runs.
func (s *nodeStatus) register(n *corev1.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.health()
	s.healthy = err == nil
	now := s.clk.Now()
	n.Status = buildStatus(nil, s.cfg, s.host, s.rt, err, metav1.NewTime(now))
	s.last, s.pushedAt = *n.Status.DeepCopy(), now
	s.base = n.DeepCopy()
}

// Ping succeeds until ctx ends: see nodeStatus.
func (s *nodeStatus) Ping(ctx context.Context) error { return ctx.Err() }

// NotifyNodeStatus pushes every change of the node status to cb until
// ctx ends, from one goroutine (it returns at once). virtual-kubelet's cb
// hands the node to its control loop through a one-slot channel, so a
// push waits while the controller patches the previous one. That send
// cannot be abandoned: the goroutine checks ctx before each push and
// pushes at most once per healthPollPeriod, so that it is not caught
// sending to a controller that has just stopped.
func (s *nodeStatus) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	go func() {
		t := s.clk.NewTicker(healthPollPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			if n := s.poll(ctx); n != nil && ctx.Err() == nil {
				cb(n)
			}
		}
	}()
}

// poll looks at the status once and returns the node to push, nil when
// nothing changed that is worth a push.
func (s *nodeStatus) poll(ctx context.Context) *corev1.Node {
	unhealthy := s.health()
	s.mu.Lock()
	now := s.clk.Now()
	becameHealthy := unhealthy == nil && !s.healthy
	s.healthy = unhealthy == nil
	refresh := becameHealthy || now.Sub(s.refreshedAt) >= statusRefreshPeriod
	s.mu.Unlock()
	if refresh {
		h := s.facts()
		rt, verr := runtimeInfo{}, error(nil)
		// A runtime that is down would hold the call: its version is
		// read again once it is healthy.
		if unhealthy == nil {
			vctx, cancel := context.WithTimeout(ctx, versionTimeout)
			rt, verr = s.version(vctx)
			cancel()
			if verr != nil && ctx.Err() == nil {
				s.logger.Warn("runtime version", zap.Error(verr))
			}
		}
		s.mu.Lock()
		s.host, s.refreshedAt = h, now
		if unhealthy == nil && verr == nil {
			s.rt = rt
		}
		s.mu.Unlock()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.base == nil {
		return nil // not registered
	}
	next := buildStatus(&s.last, s.cfg, s.host, s.rt, unhealthy, metav1.NewTime(now))
	switch statusChange(&s.last, &next) {
	case "":
		return nil
	case "message":
		if now.Sub(s.pushedAt) < statusRefreshPeriod {
			return nil
		}
	}
	s.last, s.pushedAt = next, now
	n := s.base.DeepCopy()
	n.Status = *next.DeepCopy()
	return n
}
