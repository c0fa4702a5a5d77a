package crisim

import (
	"cmp"

	"github.com/syncpod/syncpod/internal/crifilter"
	"k8s.io/utils/clock"
)

// resolveID turns a filter id into a full id the way containerd does
// (internal/crifilter): an exact id, or a prefix matching exactly one id.
// An unmatched or ambiguous prefix is kept as is, so it is compared as an
// exact id (a prefix thus matches nothing). Empty stays empty (no filter).
func resolveID[T any](id string, byID map[string]T) string {
	if full, ok := crifilter.ResolveKey(id, byID); ok {
		return full
	}
	return id
}

func cmpCreated(a, b int64, idA, idB string) int {
	if c := cmp.Compare(a, b); c != 0 {
		return c
	}
	return cmp.Compare(idA, idB)
}

// stopTimers stops scripted-exit timers; call it without holding Runtime.mu.
func stopTimers(ts []clock.Timer) {
	for _, t := range ts {
		t.Stop()
	}
}
