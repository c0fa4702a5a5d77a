package agent

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/syncpod/syncpod/pleg"
)

// statusSource is the agent's PLEG, chosen once in New: the library's
// evented pleg (syncpod mode) or the kubelet's generic relist every second
// (baseline). The rest of the agent asks it, never which mode it is in.
type statusSource interface {
	// start is called by Start before run: the relist's first pass at once.
	start()
	// run feeds the status cache and wakes the workers until ctx ends.
	run(ctx context.Context)
	// podStatus is the workers' current view of the pod, nil if none.
	podStatus(uid types.UID) *runtimePodStatus
	// health is the PLEG's health, as the kubelet's, and its mode's name.
	health() (ok bool, err error, mode string)
	// drained reports that nothing it saw is still on its way to a worker.
	drained() bool
	// longestRelist is the longest relist so far.
	longestRelist() time.Duration
	// stats are the pleg package's counters (zero for the relist) and the
	// entries it keeps per pod beyond the agent's cache.
	stats() (pleg.Stats, int)
}

var (
	_ statusSource = (*eventedLifecycle)(nil)
	_ statusSource = (*relister)(nil)
)

func (l *eventedLifecycle) start() {}

func (l *eventedLifecycle) podStatus(uid types.UID) *runtimePodStatus {
	st, _ := l.status(uid)
	return st
}

func (l *eventedLifecycle) health() (bool, error, string) {
	ok, err := l.p.Healthy()
	return ok, err, l.p.Mode().String()
}

func (l *eventedLifecycle) longestRelist() time.Duration { return l.relistMax() }

func (l *eventedLifecycle) stats() (pleg.Stats, int) { return l.p.Stats(), l.keys.len() }

func (r *relister) start() { r.kick() }

func (r *relister) podStatus(uid types.UID) *runtimePodStatus {
	st, _ := r.cache.Get(uid)
	return st
}

func (r *relister) health() (bool, error, string) {
	ok, err := r.healthy()
	return ok, err, "relist"
}

// drained: the relist wakes its workers from its own pass, counted as
// work while it runs.
func (r *relister) drained() bool { return true }

func (r *relister) longestRelist() time.Duration { return r.maxRelist() }

func (r *relister) stats() (pleg.Stats, int) { return pleg.Stats{}, 0 }
