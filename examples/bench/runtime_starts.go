package main

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
)

// runtimeStarts measures pod startup from the runtime's own timestamps,
// the same way for every orchestrator: a pod has started when every one
// of its regular containers has, by the StartedAt containerd reports for
// the container's first start, and its startup is from the moment it was
// handed to the orchestrator (applied to the agent, or its manifest
// written for the kubelet) to then.
type runtimeStarts struct {
	rt runtimeapi.RuntimeServiceClient
	// podKey maps a container's pod labels to the scenario's
	// namespace/name (the kubelet suffixes static pods with its node name).
	podKey func(namespace, name string) string

	mu      sync.Mutex
	applied map[string]time.Time            // by namespace/name
	started map[string]map[string]time.Time // namespace/name → container → first start
	done    map[string]bool                 // container IDs already read
}

func newRuntimeStarts(rt runtimeapi.RuntimeServiceClient, podKey func(namespace, name string) string) *runtimeStarts {
	return &runtimeStarts{rt: rt, podKey: podKey, applied: map[string]time.Time{},
		started: map[string]map[string]time.Time{}, done: map[string]bool{}}
}

func (s *runtimeStarts) apply(key string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.applied[key]; !ok {
		s.applied[key] = at
	}
}

// poll reads the start time of every container that has started since
// the last poll.
func (s *runtimeStarts) poll(ctx context.Context) error {
	resp, err := s.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return err
	}
	for _, c := range resp.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_CREATED || c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
			continue
		}
		s.mu.Lock()
		done := s.done[c.Id]
		s.mu.Unlock()
		if done {
			continue
		}
		st, err := s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
		if err != nil || st.GetStatus().GetStartedAt() == 0 {
			continue // gone meanwhile, or not started yet: the next poll sees it
		}
		key := s.podKey(c.Labels[podcri.LabelPodNamespace], c.Labels[podcri.LabelPodName])
		at := time.Unix(0, st.Status.StartedAt)
		s.mu.Lock()
		s.done[c.Id] = true
		if s.started[key] == nil {
			s.started[key] = map[string]time.Time{}
		}
		name := c.Labels[podcri.LabelContainerName]
		if prev, ok := s.started[key][name]; !ok || at.Before(prev) {
			s.started[key][name] = at
		}
		s.mu.Unlock()
	}
	return nil
}

// startups is, for each of pods that measured accepts and that has
// started, its startup latency, sorted.
func (s *runtimeStarts) startups(pods []*corev1.Pod, measured func(string) bool) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		applied, ok := s.applied[key]
		if !measured(key) || !ok {
			continue
		}
		var last time.Time
		complete := true
		for _, c := range p.Spec.Containers {
			at, ok := s.started[key][c.Name]
			if !ok {
				complete = false
				break
			}
			if at.After(last) {
				last = at
			}
		}
		if complete {
			out = append(out, max(0, last.Sub(applied)))
		}
	}
	slices.Sort(out)
	return out
}

// watch polls every period until ctx ends.
func (s *runtimeStarts) watch(ctx context.Context, period time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			_ = s.poll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		_ = s.poll(context.Background()) // what started since the last tick
	}
}
