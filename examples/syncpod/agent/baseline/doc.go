// Package baseline is the syncpod agent's baseline mode: one pod sync in
// the order today's kubelet follows, for comparison with the agent's
// syncpod mode.
//
// A sync waits until the relist PLEG has written a status of the pod newer
// than the end of the pod's previous sync (the kubelet's
// GetNewerThan), computes the pod's actions, creates the sandbox if it
// needs one, kills what must go, then either starts the first init
// container of the chain, or starts the regular containers one after
// another, each pulling its image first (serialized node-wide) while the
// pod's worker waits. The next init container starts on the next sync.
//
// The package decides the order only: the agent carries out each step
// through [Pod], its runtime layer making every CRI call. The agent
// chooses this mode at construction (agent.ModeBaseline).
package baseline
