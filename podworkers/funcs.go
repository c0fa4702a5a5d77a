package podworkers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Funcs is a Syncer made of functions, one per phase; a nil function is a
// phase with nothing to do, which succeeds at once (a nil Sync returns a
// zero Result).
type Funcs struct {
	// Sync is called as SyncPod.
	Sync func(ctx context.Context, update UpdateType, pod *corev1.Pod) (Result, error)
	// Terminating is called as SyncTerminatingPod.
	Terminating func(ctx context.Context, pod *corev1.Pod, gracePeriod time.Duration) error
	// Terminated is called as SyncTerminatedPod.
	Terminated func(ctx context.Context, pod *corev1.Pod) error
	// TerminatingRuntime is called as SyncTerminatingRuntimePod.
	TerminatingRuntime func(ctx context.Context, pod RuntimePod, gracePeriod time.Duration) error
}

var _ Syncer = Funcs{}

// SyncPod calls f.Sync, if set.
func (f Funcs) SyncPod(ctx context.Context, update UpdateType, pod *corev1.Pod) (Result, error) {
	if f.Sync == nil {
		return Result{}, nil
	}
	return f.Sync(ctx, update, pod)
}

// SyncTerminatingPod calls f.Terminating, if set.
func (f Funcs) SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, gracePeriod time.Duration) error {
	if f.Terminating == nil {
		return nil
	}
	return f.Terminating(ctx, pod, gracePeriod)
}

// SyncTerminatedPod calls f.Terminated, if set.
func (f Funcs) SyncTerminatedPod(ctx context.Context, pod *corev1.Pod) error {
	if f.Terminated == nil {
		return nil
	}
	return f.Terminated(ctx, pod)
}

// SyncTerminatingRuntimePod calls f.TerminatingRuntime, if set.
func (f Funcs) SyncTerminatingRuntimePod(ctx context.Context, pod RuntimePod, gracePeriod time.Duration) error {
	if f.TerminatingRuntime == nil {
		return nil
	}
	return f.TerminatingRuntime(ctx, pod, gracePeriod)
}
