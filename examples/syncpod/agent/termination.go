package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// minStopGraceSeconds is the least time a container is given to stop, as
// the kubelet gives (its minimumGracePeriodInSeconds): even a container
// killed after the pod's grace period ran out gets a SIGTERM and two
// seconds before the SIGKILL.
const minStopGraceSeconds = 2

// killGracePeriod is the pod's grace period for a kill: a deletion's own
// (metadata.deletionGracePeriodSeconds, set when the pod was deleted with
// a shorter one) over the spec's terminationGracePeriodSeconds (default
// 30 s).
func killGracePeriod(pod *corev1.Pod) time.Duration {
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return time.Duration(gracePeriod(pod)) * time.Second
}

// stopContainersGracefully stops the running containers of sandbox id
// as the kubelet ends a pod: the regular (and running init) containers at
// once, each given what is left of grace, the pod's grace period; then the
// sidecars, one at a time in reverse start order, each with what is left
// by then; never less than minStopGraceSeconds. Each container's preStop
// hook (from pod's spec; pod may be nil, for a pod no longer known) runs
// first, bounded by what is left of grace, and its time comes out of the
// StopContainer timeout. It returns when every stop has returned.
func (a *Agent) stopContainersGracefully(ctx context.Context, pod *corev1.Pod, grace time.Duration, id string) error {
	cs, err := a.runtime.sandboxContainers(ctx, id,
		&runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	if err != nil {
		return fmt.Errorf("ListContainers: %w", err)
	}
	deadline := a.clock.Now().Add(grace)
	remaining := func() int64 {
		left := int64(math.Ceil(deadline.Sub(a.clock.Now()).Seconds()))
		return max(left, minStopGraceSeconds)
	}
	var regular, sidecars []*runtimeapi.Container
	for _, c := range cs {
		if c.GetAnnotations()[annotationInit] == "sidecar" {
			sidecars = append(sidecars, c)
		} else {
			regular = append(regular, c)
		}
	}
	var mu sync.Mutex
	var errs []error
	stop := func(c *runtimeapi.Container) {
		if pod != nil {
			if left := deadline.Sub(a.clock.Now()); left > 0 {
				a.preStop(ctx, pod, containerSpec(pod, c.GetMetadata().GetName()), c.Id, left)
			}
		}
		if err := a.runtime.stopContainer(ctx, c.Id, remaining()); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("StopContainer %s: %w", c.GetMetadata().GetName(), err))
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for _, c := range regular {
		wg.Go(func() { stop(c) })
	}
	wg.Wait()
	// A sidecar serves the containers that started after it: the last
	// started stops first.
	sort.Slice(sidecars, func(i, j int) bool { return sidecars[i].CreatedAt > sidecars[j].CreatedAt })
	for _, c := range sidecars {
		stop(c)
	}
	return errors.Join(errs...)
}
