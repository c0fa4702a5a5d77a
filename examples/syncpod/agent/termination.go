package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
// by then; never less than minStopGraceSeconds. It returns when every
// stop has returned.
func (a *Agent) stopContainersGracefully(ctx context.Context, grace time.Duration, id string) error {
	cs, err := a.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: id,
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
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
		if err := a.rt.StopContainer(ctx, c.Id, remaining()); err != nil {
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

// annotationGracePeriod is the kubelet's container annotation holding the
// pod's terminationGracePeriodSeconds.
const annotationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"

// RemoveOrphans removes every pod on the runtime that the agent (or an
// earlier run of it) made and that no update has asked for since this
// agent started, stopping each gracefully with the grace period recorded
// on its containers. Call it once the pod source has delivered its
// initial state (after a ManifestDir's first Sync), so that a pod whose
// manifest vanished while the agent was down does not keep running; pods
// asked for are adopted by their workers instead. It returns the pods
// removed (namespace/name) and the removals that failed.
func (a *Agent) RemoveOrphans(ctx context.Context) ([]string, error) {
	if ctx == nil {
		return nil, errors.New("agent: RemoveOrphans: ctx must not be nil")
	}
	sbs, err := a.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{managedLabel: "true"}})
	if err != nil {
		return nil, fmt.Errorf("agent: RemoveOrphans: ListPodSandbox: %w", err)
	}
	var removed []string
	var errs []error
	for _, sb := range sbs {
		if a.workers.Known(types.UID(sb.GetLabels()[labelPodUID])) {
			continue
		}
		name := sb.GetMetadata().GetNamespace() + "/" + sb.GetMetadata().GetName()
		grace, err := a.orphanGrace(ctx, sb.Id)
		if err == nil {
			err = a.stopContainersGracefully(ctx, grace, sb.Id)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("orphan %s: %w", name, err))
		}
		if err := a.removeSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("orphan %s: %w", name, err))
			continue
		}
		a.log.Info("removed an orphaned pod", zap.String("pod", name), zap.String("sandbox", sb.Id))
		if !slices.Contains(removed, name) {
			removed = append(removed, name)
		}
	}
	slices.Sort(removed)
	return removed, errors.Join(errs...)
}

// orphanGrace is the longest grace period recorded on the containers of
// sandbox id, or the default 30 s when none records one.
func (a *Agent) orphanGrace(ctx context.Context, id string) (time.Duration, error) {
	cs, err := a.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: id})
	if err != nil {
		return 0, fmt.Errorf("ListContainers: %w", err)
	}
	grace, found := int64(0), false
	for _, c := range cs {
		if g, err := strconv.ParseInt(c.GetAnnotations()[annotationGracePeriod], 10, 64); err == nil && g >= 0 {
			grace, found = max(grace, g), true
		}
	}
	if !found {
		grace = 30
	}
	return time.Duration(grace) * time.Second, nil
}
