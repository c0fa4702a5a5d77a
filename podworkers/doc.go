// Package podworkers runs the per-pod workers of a kubelet-like agent: it
// calls a [Syncer] for each pod, one call of a pod at a time, from a bounded
// pool of goroutines.
//
// A pod moves through SyncPod (repeated) → SyncTerminatingPod (retried until
// it succeeds) → SyncTerminatedPod (retried until it succeeds) → finished; a
// runtime pod the configuration does not know (an orphan) is killed with
// SyncTerminatingRuntimePod and is then finished. Guarantees:
//
//   - At most one Syncer call of a pod runs at a time, and at most
//     [WithMaxParallel] calls run at once. An idle pod holds no goroutine.
//   - Updates coalesce: updates and wakes that arrive while a pod's call
//     runs become one pending call, made with the last pod given. Ready pods
//     are served first in, first out, so a pod woken over and over cannot
//     starve the others.
//   - A kill is never lost: once asked (UpdateKill, or SyncPod reporting a
//     terminal phase) the pod never runs SyncPod again, a running SyncPod's
//     context is cancelled, and the termination phases run in order. A
//     later kill can shorten the grace period, never lengthen it.
//   - A failed call is retried after a per-pod back-off ([WithBackOff]); a
//     successful SyncPod is repeated after [Result.RequeueAfter], the resync
//     interval ([WithResyncInterval]) or a [Workers.Wake], whichever comes
//     first. A wake or an update never waits for a back-off.
//   - A finished pod keeps a small record, so a late update for its UID
//     does not start it again ([ErrFinished]), until [Workers.Forget].
//   - Close cancels the running calls' contexts and waits for every
//     goroutine the value started.
package podworkers
