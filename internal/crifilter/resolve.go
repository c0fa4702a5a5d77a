package crifilter

import (
	"iter"
	"strings"
)

// ResolveID returns the ID that id denotes among ids: id itself when it is
// one of them, otherwise the only distinct ID that starts with id. ok is
// false when no ID or several distinct IDs start with id. An empty id is no
// filter: ResolveID returns "", true without reading ids.
//
// ids may repeat an ID; a repeated ID counts once.
func ResolveID(id string, ids iter.Seq[string]) (resolved string, ok bool) {
	if id == "" {
		return "", true
	}
	match, n := "", 0
	for candidate := range ids {
		if candidate == id {
			return id, true
		}
		if !strings.HasPrefix(candidate, id) {
			continue
		}
		// Keep scanning when ambiguous: an exact match may follow.
		if n == 0 {
			match, n = candidate, 1
		} else if candidate != match {
			n = 2
		}
	}
	if n != 1 {
		return "", false
	}
	return match, true
}

// ResolveKey is ResolveID over the keys of byID, with the exact match
// looked up directly.
func ResolveKey[T any](id string, byID map[string]T) (resolved string, ok bool) {
	if id == "" {
		return "", true
	}
	if _, ok := byID[id]; ok {
		return id, true
	}
	match := ""
	for candidate := range byID {
		if strings.HasPrefix(candidate, id) {
			if match != "" {
				return "", false
			}
			match = candidate
		}
	}
	return match, match != ""
}

// IDs yields the ID of every item, for ResolveID.
func IDs[T interface{ GetId() string }](items []T) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, item := range items {
			if !yield(item.GetId()) {
				return
			}
		}
	}
}
