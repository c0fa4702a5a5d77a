package crisim

import (
	"cmp"
	"strings"

	"k8s.io/utils/clock"
)

// resolveID turns a filter id into a full id the way containerd does: an
// exact id, or a prefix matching exactly one id. An unmatched or ambiguous
// prefix is kept as is (so it matches nothing). Empty stays empty (no filter).
func resolveID[T any](id string, byID map[string]T) string {
	if id == "" {
		return ""
	}
	if _, ok := byID[id]; ok {
		return id
	}
	found := ""
	for full := range byID {
		if strings.HasPrefix(full, id) {
			if found != "" {
				return id
			}
			found = full
		}
	}
	if found == "" {
		return id
	}
	return found
}

// labelsMatch reports whether labels hold every key/value of selector.
func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
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
