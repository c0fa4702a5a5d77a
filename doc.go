// Package syncpod is the front page of a library of kubelet syncPod building
// blocks: the parts a custom kubelet, a virtual-kubelet provider or an edge
// agent needs to run pods on a CRI runtime without the kubelet's serial,
// blocking sync loop.
//
// This package holds no code. Each problem has its own package, which imports
// no sibling except through a small interface it declares, so a program can
// take one package and leave the rest:
//
//   - [github.com/syncpod/syncpod/criclient]: a CRI gRPC client with per-call
//     timeouts, admission control per call class (so a burst of RunPodSandbox
//     cannot starve the List calls that health checks need) and optional List
//     snapshots merged across callers. [github.com/syncpod/syncpod/criclient/crisim]
//     is a simulated CRI runtime with latency, contention, an event stream and
//     fault injection, for tests and benchmarks.
//   - [github.com/syncpod/syncpod/asyncpull]: image pulls leave the pod's sync:
//     deduplicated, bounded globally and per registry, rate limited without
//     rejecting, ordered by a pluggable policy, backed off, cancelled when no
//     pod wants them any more, and the pod's worker is woken when they finish.
//   - [github.com/syncpod/syncpod/concurrentstart]: starts a pod's containers as
//     a dependency graph (init containers in order, sidecars gating what
//     follows, regular containers concurrently) with bounded parallelism;
//     [github.com/syncpod/syncpod/concurrentstart/podplan] builds that graph
//     from a PodSpec, and [github.com/syncpod/syncpod/concurrentstart/admission]
//     shares the runtime between pods in arrival order under an adaptive bound.
//   - [github.com/syncpod/syncpod/pleg]: a pod lifecycle event generator on the
//     CRI event stream that falls back to relisting while the stream is down,
//     reconnects forever, and reports health honestly.
//   - [github.com/syncpod/syncpod/statecache]: sharded pod-status caches whose
//     GetNewerThan blocks with a context and wakes only the waiters of the key
//     that changed, plus a memo for slow lookups.
//   - [github.com/syncpod/syncpod/locks]: exact keyed mutexes, striped RW locks
//     and copy-on-write snapshots for per-pod state.
//   - [github.com/syncpod/syncpod/criclient/runtimeview]: a local view of the runtime's
//     sandboxes and containers fed by its event stream and a periodic relist,
//     which answers Lists from memory with read-your-writes and a staleness
//     bound and fans the event stream out to many subscribers.
//
// How they compose: a pod worker per pod reads its status from a statecache
// fed by pleg, asks asyncpull for its images (which returns at once and wakes
// the worker later), and when the images are present runs a concurrentstart
// plan whose start functions call the runtime through criclient. The reference
// orchestrator in examples/syncpod does exactly that and is the place to start
// reading.
package syncpod
