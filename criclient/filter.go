package criclient

import (
	"slices"

	"github.com/syncpod/syncpod/internal/crifilter"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The filters below reproduce, on a snapshot, what containerd and CRI-O do
// with a filter on the runtime side (package internal/crifilter):
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

func filterPodSandboxes(items []*runtimeapi.PodSandbox, f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	id, ok := crifilter.ResolveID(f.GetId(), crifilter.IDs(items))
	if !ok {
		return []*runtimeapi.PodSandbox{}
	}
	out := make([]*runtimeapi.PodSandbox, 0, len(items))
	for _, s := range items {
		if crifilter.MatchSandbox(f, id, crifilter.SandboxOf(s)) {
			out = append(out, clonePodSandbox(s))
		}
	}
	return out
}

// filterContainers returns ok=false when the filter cannot be decided on the
// snapshot (see PodSandboxId above).
func filterContainers(items []*runtimeapi.Container, f *runtimeapi.ContainerFilter) (_ []*runtimeapi.Container, ok bool) {
	sandboxID := f.GetPodSandboxId()
	if sandboxID != "" && !slices.ContainsFunc(items, func(c *runtimeapi.Container) bool { return c.GetPodSandboxId() == sandboxID }) {
		return nil, false
	}
	id, ok := crifilter.ResolveID(f.GetId(), crifilter.IDs(items))
	if !ok {
		return []*runtimeapi.Container{}, true
	}
	out := make([]*runtimeapi.Container, 0, len(items))
	for _, c := range items {
		if crifilter.MatchContainer(f, id, sandboxID, crifilter.ContainerOf(c)) {
			out = append(out, cloneContainer(c))
		}
	}
	return out, true
}
