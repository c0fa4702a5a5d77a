package agent

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// statusNotifier delivers pod statuses to WithPodStatusHook's function
// from one goroutine, outside every agent lock. Pending pods are kept by
// UID, so a burst of changes of one pod costs one status computation and
// one call, and a slow hook never blocks the worker or PLEG that reported
// the change.
type statusNotifier struct {
	mu      sync.Mutex
	pending map[types.UID]*corev1.Pod // nil: compute the status at delivery
	order   []types.UID
	signal  chan struct{}
}

func newStatusNotifier() *statusNotifier {
	return &statusNotifier{pending: map[types.UID]*corev1.Pod{}, signal: make(chan struct{}, 1)}
}

// enqueue queues uid; final, when not nil, is its terminal status, which a
// later change of the pod does not replace.
func (n *statusNotifier) enqueue(uid types.UID, final *corev1.Pod) {
	n.mu.Lock()
	old, queued := n.pending[uid]
	if !queued {
		n.order = append(n.order, uid)
	}
	if final != nil || old == nil {
		n.pending[uid] = final
	}
	n.mu.Unlock()
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

func (n *statusNotifier) next() (types.UID, *corev1.Pod, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.order) == 0 {
		return "", nil, false
	}
	uid := n.order[0]
	n.order = n.order[1:]
	pod := n.pending[uid]
	delete(n.pending, uid)
	return uid, pod, true
}

// run delivers until ctx ends; what is pending then is dropped.
func (a *Agent) runStatusNotifier(ctx context.Context) {
	n := a.notifier
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.signal:
		}
		for ctx.Err() == nil {
			uid, pod, ok := n.next()
			if !ok {
				break
			}
			final := pod != nil
			if !final {
				var changed bool
				if pod, changed, ok = a.reportPod(uid, true); !ok || !changed {
					continue
				}
			}
			a.cfg.statusHook(PodStatusUpdate{Pod: pod, Final: final})
		}
	}
}

// podStatusChanged tells the status hook that what the agent reports of
// pod uid may have changed (a runtime event, a sync's outcome, a probe
// result). Without a hook it costs nothing.
func (a *Agent) podStatusChanged(uid types.UID) {
	if a.notifier != nil {
		a.notifier.enqueue(uid, nil)
	}
}

// wakeAndReport wakes uid's worker and reports a possible status change:
// what a runtime event means for a pod.
func (a *Agent) wakeAndReport(uid types.UID) {
	a.wake(uid)
	a.podStatusChanged(uid)
}
