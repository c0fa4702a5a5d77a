package criclient

import (
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The filters below reproduce, on a snapshot, what containerd and CRI-O do
// with a filter on the runtime side:
//   - Id: an exact ID, or a prefix that matches exactly one ID (both
//     runtimes resolve truncated IDs); an unknown or ambiguous prefix
//     matches nothing;
//   - State: equal state, when set;
//   - PodSandboxId (containers): the same ID/prefix rule, resolved by the
//     runtime against all sandboxes. A container list does not hold the
//     sandboxes without containers, so only a PodSandboxId equal to the
//     sandbox ID of a listed container is decided locally; any other value
//     (a prefix, or a sandbox without containers) is sent to the runtime;
//   - LabelSelector: every key present with an equal value (an empty
//     selector matches everything).
// Matches are cloned: the snapshot is shared and callers may modify what
// they get.

// resolveID returns the ID that id denotes among ids (exact, or unique
// prefix), or "" with ok=false when it denotes none.
func resolveID(id string, ids func(yield func(string) bool)) (string, bool) {
	match := ""
	n := 0
	for candidate := range ids {
		if candidate == id {
			return id, true
		}
		if strings.HasPrefix(candidate, id) && candidate != match {
			match = candidate
			n++
		}
	}
	return match, n == 1
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func filterPodSandboxes(items []*runtimeapi.PodSandbox, f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	id := f.GetId()
	if id != "" {
		var ok bool
		id, ok = resolveID(id, func(yield func(string) bool) {
			for _, s := range items {
				if !yield(s.GetId()) {
					return
				}
			}
		})
		if !ok {
			return []*runtimeapi.PodSandbox{}
		}
	}
	out := make([]*runtimeapi.PodSandbox, 0, len(items))
	for _, s := range items {
		if id != "" && s.GetId() != id {
			continue
		}
		if f.GetState() != nil && f.GetState().GetState() != s.GetState() {
			continue
		}
		if !labelsMatch(f.GetLabelSelector(), s.GetLabels()) {
			continue
		}
		out = append(out, clonePodSandbox(s))
	}
	return out
}

// filterContainers returns ok=false when the filter cannot be decided on the
// snapshot (see PodSandboxId above).
func filterContainers(items []*runtimeapi.Container, f *runtimeapi.ContainerFilter) (_ []*runtimeapi.Container, ok bool) {
	id, sandboxID := f.GetId(), f.GetPodSandboxId()
	if sandboxID != "" && !slices.ContainsFunc(items, func(c *runtimeapi.Container) bool { return c.GetPodSandboxId() == sandboxID }) {
		return nil, false
	}
	if id != "" {
		var ok bool
		id, ok = resolveID(id, func(yield func(string) bool) {
			for _, c := range items {
				if !yield(c.GetId()) {
					return
				}
			}
		})
		if !ok {
			return []*runtimeapi.Container{}, true
		}
	}
	out := make([]*runtimeapi.Container, 0, len(items))
	for _, c := range items {
		if id != "" && c.GetId() != id {
			continue
		}
		if sandboxID != "" && c.GetPodSandboxId() != sandboxID {
			continue
		}
		if f.GetState() != nil && f.GetState().GetState() != c.GetState() {
			continue
		}
		if !labelsMatch(f.GetLabelSelector(), c.GetLabels()) {
			continue
		}
		out = append(out, cloneContainer(c))
	}
	return out, true
}
