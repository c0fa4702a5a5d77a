// Package crifilter holds the semantics of the CRI's PodSandboxFilter and
// ContainerFilter as containerd applies them on the runtime side, so that
// code answering a List call locally (from a snapshot, a view or a
// simulated runtime) filters exactly as the runtime would. The kubelet
// sends every List filter to the runtime; answering locally saves the round
// trip only if the answer is the same, and one implementation keeps the
// local answers of every package the same.
//
// A filter is applied in two steps. First its Id (and, for containers, its
// PodSandboxId) is resolved with ResolveID or ResolveKey: an exact ID, or a
// prefix that matches exactly one ID (containerd resolves truncated IDs).
// What an unresolved ID means is the caller's choice: containerd answers
// with an empty list, which is what a caller gets by returning early when ok
// is false. Then every item is tested with MatchSandbox or MatchContainer,
// given the resolved IDs:
//
//	id, ok := crifilter.ResolveKey(f.GetId(), sandboxesByID)
//	if !ok {
//		return nil // an unknown or ambiguous id matches nothing
//	}
//	for _, s := range sandboxes {
//		if crifilter.MatchSandbox(f, id, crifilter.SandboxOf(s)) {
//			out = append(out, s)
//		}
//	}
//
// The rules, for every field that is set:
//   - Id, PodSandboxId: equal to the resolved ID ("" is no filter);
//   - State: equal state;
//   - LabelSelector: every key present with an equal value (an empty
//     selector matches everything).
//
// A nil filter matches everything. The package does not clone, sort or
// lock: callers keep their own storage and ordering.
package crifilter
