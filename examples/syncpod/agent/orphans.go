package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncpod/syncpod/criclient/podcri"
)

// RemoveOrphans removes every pod on the runtime that the agent (or an
// earlier run of it) made and that no update has asked for since this
// agent started, stopping each gracefully with the grace period recorded
// on its containers. Call it once the pod source has delivered its
// initial state (after a manifest.Dir's first Sync), so that a pod whose
// manifest vanished while the agent was down does not keep running; pods
// asked for are adopted by their workers instead. It returns the pods
// removed (namespace/name) and the removals that failed. The pod
// directories (Node.PodDir) of the pods removed go too, and so does any
// other pod directory of a pod neither asked for nor on the runtime (its
// sandbox was removed, the directory was not: the kubelet's orphaned pod
// directories).
func (a *Agent) RemoveOrphans(ctx context.Context) ([]string, error) {
	if ctx == nil {
		return nil, errors.New("agent: RemoveOrphans: ctx must not be nil")
	}
	sbs, err := a.runtime.sandboxes(ctx, map[string]string{managedLabel: "true"})
	if err != nil {
		return nil, fmt.Errorf("agent: RemoveOrphans: ListPodSandbox: %w", err)
	}
	var removed []string
	var errs []error
	left := map[types.UID]bool{} // pods that keep a sandbox
	for _, sb := range sbs {
		uid := types.UID(sb.GetLabels()[labelPodUID])
		if a.workers.Known(uid) {
			left[uid] = true
			continue
		}
		name := sb.GetMetadata().GetNamespace() + "/" + sb.GetMetadata().GetName()
		grace, err := a.orphanGrace(ctx, sb.Id)
		if err == nil {
			err = a.stopContainersGracefully(ctx, nil, grace, sb.Id)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("orphan %s: %w", name, err))
		}
		if err := a.removeSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("orphan %s: %w", name, err))
			left[uid] = true
			continue
		}
		a.log.Info("removed an orphaned pod", zap.String("pod", name), zap.String("sandbox", sb.Id))
		if !slices.Contains(removed, name) {
			removed = append(removed, name)
		}
	}
	if _, err := a.removePodDirs(func(uid types.UID) bool { return left[uid] || a.workers.Known(uid) }); err != nil {
		errs = append(errs, fmt.Errorf("orphaned pod directories: %w", err))
	}
	slices.Sort(removed)
	return removed, errors.Join(errs...)
}

// orphanGrace is the longest grace period recorded on the containers of
// sandbox id, or the default 30 s when none records one.
func (a *Agent) orphanGrace(ctx context.Context, id string) (time.Duration, error) {
	cs, err := a.runtime.sandboxContainers(ctx, id, nil)
	if err != nil {
		return 0, fmt.Errorf("ListContainers: %w", err)
	}
	grace, found := int64(0), false
	for _, c := range cs {
		if g, err := strconv.ParseInt(c.GetAnnotations()[podcri.AnnotationPodTerminationGracePeriod], 10, 64); err == nil && g >= 0 {
			grace, found = max(grace, g), true
		}
	}
	if !found {
		grace = 30
	}
	return time.Duration(grace) * time.Second, nil
}
