package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
	"github.com/syncpod/syncpod/podworkers"
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
	type orphan struct {
		rp    podworkers.RuntimePod
		grace time.Duration
		wait  <-chan orphanResult
	}
	var orphans []*orphan
	byUID := map[types.UID]*orphan{}
	for _, sb := range sbs {
		uid := types.UID(sb.GetLabels()[labelPodUID])
		if a.known(uid) {
			left[uid] = true
			continue
		}
		grace, err := a.orphanGrace(ctx, sb.Id)
		if uid == "" { // not one a worker can take: removed here
			res := a.removeOrphanSandbox(ctx, sb, grace, err)
			removed, errs = append(removed, res.removed...), append(errs, res.err)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("orphan %s/%s: %w", sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName(), err))
			grace = 30 * time.Second
		}
		o := byUID[uid]
		if o == nil {
			o = &orphan{rp: podworkers.RuntimePod{UID: uid, Namespace: sb.GetMetadata().GetNamespace(), Name: sb.GetMetadata().GetName()}}
			byUID[uid] = o
			orphans = append(orphans, o)
		}
		o.grace = max(o.grace, grace)
	}
	// Each orphan is killed by its pod worker (SyncTerminatingRuntimePod),
	// as the kubelet's housekeeping hands its runtime pods to the workers.
	for _, o := range orphans {
		o.wait = a.orphans.add(o.rp.UID)
		if err := a.workers.Update(podworkers.PodUpdate{Type: podworkers.UpdateKill, RuntimePod: &o.rp, GracePeriod: &o.grace}); err != nil {
			a.orphans.done(o.rp.UID, orphanResult{err: fmt.Errorf("orphan %s/%s: %w", o.rp.Namespace, o.rp.Name, err), left: true})
		}
	}
	for _, o := range orphans {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agent: RemoveOrphans: %w", ctx.Err())
		case <-a.ctx.Done():
			return nil, ErrStopped
		case res := <-o.wait:
			errs = append(errs, res.err)
			if res.left {
				left[o.rp.UID] = true
			}
			for _, name := range res.removed {
				if !slices.Contains(removed, name) {
					removed = append(removed, name)
				}
			}
		}
	}
	if _, err := a.removePodDirs(func(uid types.UID) bool { return left[uid] || a.known(uid) }); err != nil {
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

// orphanResult is what removing one orphan did.
type orphanResult struct {
	removed []string // namespace/name of each sandbox removed
	err     error
	left    bool // a sandbox of it is still on the runtime
}

// removeOrphan stops and removes every sandbox of pod uid, each
// gracefully within grace: SyncTerminatingRuntimePod's work.
func (a *Agent) removeOrphan(ctx context.Context, uid types.UID, grace time.Duration) orphanResult {
	sbs, err := a.runtime.sandboxes(ctx, map[string]string{labelPodUID: string(uid)})
	if err != nil {
		return orphanResult{err: fmt.Errorf("orphan %s: ListPodSandbox: %w", uid, err), left: true}
	}
	var res orphanResult
	var errs []error
	for _, sb := range sbs {
		r := a.removeOrphanSandbox(ctx, sb, grace, nil)
		res.removed = append(res.removed, r.removed...)
		res.left = res.left || r.left
		errs = append(errs, r.err)
	}
	res.err = errors.Join(errs...)
	return res
}

// removeOrphanSandbox stops sandbox sb's containers within grace (unless
// reading the grace failed with graceErr) and removes it.
func (a *Agent) removeOrphanSandbox(ctx context.Context, sb *runtimeapi.PodSandbox, grace time.Duration, graceErr error) orphanResult {
	name := sb.GetMetadata().GetNamespace() + "/" + sb.GetMetadata().GetName()
	var errs []error
	err := graceErr
	if err == nil {
		err = a.stopContainersGracefully(ctx, nil, grace, sb.Id)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("orphan %s: %w", name, err))
	}
	if err := a.removeSandbox(ctx, sb.Id); err != nil {
		errs = append(errs, fmt.Errorf("orphan %s: %w", name, err))
		return orphanResult{err: errors.Join(errs...), left: true}
	}
	a.log.Info("removed an orphaned pod", zap.String("pod", name), zap.String("sandbox", sb.Id))
	return orphanResult{removed: []string{name}, err: errors.Join(errs...)}
}

// orphanWaits hands each orphan's removal from its worker to the
// RemoveOrphans waiting for it.
type orphanWaits struct {
	mu sync.Mutex
	m  map[types.UID]chan orphanResult
}

func (o *orphanWaits) add(uid types.UID) <-chan orphanResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[types.UID]chan orphanResult{}
	}
	ch := make(chan orphanResult, 1)
	o.m[uid] = ch
	return ch
}

func (o *orphanWaits) done(uid types.UID, res orphanResult) {
	o.mu.Lock()
	ch := o.m[uid]
	delete(o.m, uid)
	o.mu.Unlock()
	if ch != nil {
		ch <- res
	}
}
