// Package pleg is a pod lifecycle event generator: it watches a CRI runtime,
// keeps a pod status cache up to date and tells you, on a channel, when a
// pod's containers start, die or are removed — like the kubelet's PLEG, with
// the runtime's event stream used when it works and relisting when it does
// not.
//
// # Use
//
//	cache := statecache.New[types.UID, *pleg.PodStatus]()
//	p, err := pleg.New(runtime, cache) // runtime: criclient.Client, cri-client, cri-api's fake...
//	if err != nil { ... }              // *pleg.ConfigError: nil runtime or cache, bad option
//	if err := p.Start(ctx); err != nil { ... }
//	defer p.Close()                     // waits for its goroutines, closes Watch()
//	for ev := range p.Watch() {
//		// ev.ID is the pod UID, ev.Type ContainerStarted/Died/Removed or PodSync,
//		// ev.Data the container or sandbox id. The pod's status is already in
//		// the cache: read it there.
//	}
//
// After acting on a pod (starting a container, say) at time t, call
// p.RequestRelist(uid) and wait with cache.GetNewerThan(ctx, uid, t): the
// pod relist writes a status taken after t, so the wait ends fast and never
// returns a status from before your action. Healthy() is what a node's
// health check should call.
//
// To wait for one container to reach a state (to exit, say), call
// p.WaitContainerState(ctx, uid, id, runtimeapi.ContainerState_CONTAINER_EXITED),
// or p.WaitContainerRemoved(ctx, uid, id) for its removal. The wait ends
// on what the PLEG observes (a runtime event, a relist), not on the
// cache's global time, so it is as prompt in evented mode as in relisting
// mode; a state reached before the call answers at once, and when it
// returns the cache holds the status and the events of that observation
// have been delivered.
//
// # How it works
//
// Relisting (ModeRelisting, every relist period, WithRelistPeriod, default
// 1 s): take T, list all sandboxes and containers, diff each id's state with
// the kubelet's rules (→ running: ContainerStarted; → exited: ContainerDied;
// → unknown: ContainerChanged, not delivered unless WithChangedEvents; gone:
// ContainerRemoved, preceded by ContainerDied unless it had exited), inspect
// the changed pods in parallel (WithInspectParallelism, default 8, 0
// unlimited: the kubelet inspects serially), write each status to the cache
// with time T, deliver the events, and only after the whole relist call cache.UpdateTime(T). A pod whose
// inspection fails has the error cached, delivers nothing and keeps its old
// state, so the next relist reinspects it and delivers its events then. A
// pod that vanished has its cache entry deleted. Sandboxes are diffed like
// containers (READY is running, NOTREADY exited).
//
// Evented (ModeEvented): GetContainerEvents is consumed; an event with
// usable statuses updates the records and the cache (time = the event's
// CreatedAt) and delivers its events; an event without a sandbox status or
// without the statuses of the pod's containers (containerd 2.0, #129818)
// never overwrites the cache: the pod is relisted on demand instead. A
// sandbox's DELETED event deletes the pod's cache entry. When the stream
// fails the PLEG falls back to relisting at the relist period at once and
// reconnects with a jittered exponential backoff (WithBackOff)
// forever — the kubelet gives up for good after 5 errors (#129827). When the
// stream is back, one full relist reconciles what was missed, then the PLEG
// is evented again, relisting only every safety-net period
// (WithSafetyNetPeriod, default 300 s). The CRI does not tell a client
// when the runtime starts sending on a stream it has opened, so an event
// the runtime emits after that relist but before it has registered the
// stream reaches the PLEG through the next safety-net relist, as with the
// kubelet.
// Mode() and the observer's ObservedModeChange show the mode. The event
// stream is read by one reader that reconnects with a jittered back-off
// (WithBackOff) and treats a closed events channel like an ended stream.
//
// # Guarantees
//
//   - Every exit is reported exactly once per container (or sandbox) id, and
//     every removal once, whatever the order of lists and events, across
//     stream cuts, lost events and replays: each id's record only moves
//     forward (created → running → exited → removed; CRI ids never come
//     back), removed ids are remembered for DefaultTombstoneTTL
//     (10 min, more than containerd queues events) so late events about them
//     are ignored, and a relist never removes an id the PLEG learned about
//     after that relist started. ContainerStarted is reported at most once
//     per id, except after a ContainerChanged (unknown → running).
//   - An id the runtime created and removed while nobody could see it (no
//     list and no event showed it) is not reported: nothing knew it existed.
//     That includes the events containerd queued while nobody read its
//     stream and hands to the next subscriber: an event about an id the
//     PLEG does not know, older than Start or than a full relist that did
//     not list the id, is ignored (StaleEvents), so an earlier agent's pod
//     of the same uid never shows in the cache. The runtime's event times
//     are compared with the PLEG's clock: on one node they are one clock.
//   - The cache is written before the events derived from the same
//     observation are delivered, and one pod's events are delivered in the
//     order the PLEG observed the changes. The cache never takes older data
//     over newer (its Set refuses). Delivery does not hang on the cache
//     accepting: a runtime event whose status the cache refuses still
//     delivers a transition not yet reported (dropping it would lose that
//     exit) and never one already reported. When the cache kept a status
//     with a newer or equal time but older content than the events
//     delivered, the pod is relisted so the cache catches up
//     (Stats.Resyncs), then a PodSync is delivered for it: a watcher that
//     read the pod on the event may have read the older status.
//   - The Watch channel is bounded (WithChannelCapacity, default 1000) and a
//     send never blocks the PLEG. An event that does not fit is counted
//     (Stats.Dropped, an ObservedDrop observation) and its pod is owed a PodSync:
//     a PodSync for that pod is delivered after the drop (one for any number
//     of drops of that pod before it is delivered), unless Close comes
//     first. Pods get their PodSyncs first owed, first served: a pod dropped
//     again goes behind the others. Nothing is lost: on PodSync, re-read the pod from the cache,
//     which already holds everything the dropped events said.
//   - The cache's global time (UpdateTime) is advanced only by a full relist
//     whose listing succeeded, to the time taken before listing: "every
//     entry reflects every change before T". Events never advance it. The
//     kubelet's evented PLEG advanced it on a timer, so GetNewerThan
//     answered with entries older than the worker's own last action and
//     pods got duplicate containers (#121003). Callers must wait with
//     GetNewerThan(uid, timeOfLastAction) — never take an entry whose
//     timestamp is before their own last action as current — and, in
//     evented mode, call RequestRelist(uid) rather than wait for the global
//     time, which moves only every safety-net period there (or use
//     WaitContainerState, which does not depend on it).
//   - Healthy() is true only if the runtime itself answered within the
//     threshold (WithThreshold, default 3 min): a full relist or a pod
//     relist started and succeeded, a probe succeeded, the stream connected
//     or delivered an event. An idle event stream proves nothing, so in
//     evented mode the PLEG probes the runtime every probe period
//     (WithProbePeriod, default threshold/3: one ListPodSandbox, also
//     checked against the records, reconciling on a mismatch). A cache answer never counts. The error
//     says why: "pleg has yet to be successful", or "pleg was last seen
//     active 3m10s ago; threshold is 3m0s (mode relisting; event stream
//     down: ...; relists failing: ...)".
//
// # Cost
//
// At idle with 100 pods of 3 containers the relisting PLEG makes 120
// runtime calls a minute; the evented one about 1.2 (a probe a minute and a
// 2-call relist every 5 minutes). See pleg/benchmarks.txt.
//
// # Runtime and cache
//
// Runtime is the subset of k8s.io/cri-api's RuntimeService the PLEG uses,
// with cri-api's signatures. Containers are attributed to the pod of their
// sandbox (its metadata uid) or, without a listed sandbox, to their
// io.kubernetes.pod.uid label. Cache is Set/Delete/UpdateTime;
// statecache.Cache[types.UID, *pleg.PodStatus] is one. The PLEG calls the
// Cache one call at a time and never under its own locks, so a statecache
// subscriber (run inside Set and Delete) may call RequestRelist, Healthy,
// Stats or Mode; it must not call Close. The PLEG assumes the runtime's
// clock (event CreatedAt) and its own agree, as on one node.
//
// # Errors
//
// New refuses a nil or typed-nil Runtime or Cache and every bad option with
// a *ConfigError ("pleg: WithThreshold: must be > 0"); Start with a nil ctx
// and RequestRelist with an empty uid return an *ArgError; after Close,
// Start, RequestRelist, Healthy, Subscribe and the waits return ErrClosed. A
// PLEG not made by New (the zero value) answers every call that can fail
// with an *ArgError saying "use New" and starts nothing; a zero
// Subscription has ended (closed Events, an *ArgError from Err). A Runtime that panics
// (a zero-value fake) fails the call it panicked in, like an error, and the
// PLEG keeps relisting. The observer set with WithObserver is called
// synchronously, outside the PLEG's locks, from the goroutine that did the
// work, so a slow observer slows the PLEG and nothing queues behind it.
//
// Besides Watch, any number of readers may Subscribe, each with its own
// bounded buffer: a reader whose buffer is full when an event is delivered
// is not waited for; its subscription ends with ErrOverflow.
//
// # Shutdown
//
// Close abandons what the PLEG has not observed yet (a relist or a runtime
// event in flight) and the PodSyncs still owed, but keeps what it already
// delivered: Watch and each Subscription are closed after the events in
// their buffers. So this order loses no event, ContainerDied and
// ContainerRemoved included:
//
//  1. Stop the source of changes: whatever starts, stops or removes
//     containers (the pod workers) is stopped first, so that nothing
//     happens that the PLEG could not see before Close.
//  2. Wait until the PLEG has seen each last change: WaitContainerState
//     (CONTAINER_EXITED) for a container you stopped, WaitContainerRemoved
//     for one you removed. When they return, the events are in Watch and in
//     every Subscription's buffer. Keep reading meanwhile: a full Watch drops
//     the event (Stats.Dropped) for a PodSync that Close may discard, and a
//     full Subscription ends with ErrOverflow.
//  3. Close.
//  4. Read Watch and every Subscription until they are closed; a
//     Subscription's Err is then ErrClosed, not ErrOverflow.
package pleg
