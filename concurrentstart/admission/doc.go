// Package admission is a node-wide start admission that many pod workers
// share: it grants runtime work (sandbox creation, container create and
// start) pod by pod in arrival order, under a bound that adapts to the
// runtime's measured latency.
//
// On a node whose runtime is CPU-bound (runc processes on a few cores),
// starting every pod at once makes every pod wait for the whole burst: the
// calls share the cores and all finish near the end. Starting them one
// after another leaves the cores idle between calls. A Controller does
// neither: it keeps about as much work in flight as the runtime absorbs
// without slowing down, and hands the free slots to the pod that arrived
// first, so pods finish progressively, in order, at the burst's full
// throughput.
//
// Each runtime call a worker makes is wrapped in a grant:
//
//	g, err := ctl.Acquire(ctx, admission.Request{Pod: string(pod.UID), Priority: prio, Kind: "StartContainer"})
//	if err != nil {
//		return err // ctx ended, the pod was forgotten, or ctl closed
//	}
//	_, err = rt.StartContainer(ctx, id)
//	g.Release(err)
//
// and Forget(pod) is called once the pod is up or deleted, so its place in
// line is dropped and any of its work still queued fails with ErrForgotten.
//
// Order: a request is served before another when its pod's effective
// priority is higher, then when its pod arrived first (at Request.Arrived
// when the worker gives it, else with its first Acquire), then when it was
// asked first. The effective priority is the priority given to Acquire
// plus one for every WithAging interval the request has waited, so a
// low-priority pod is never starved.
//
// Bound: a Limiter decides how many grants may be held at once. The
// default, AIMD, learns each Kind's uncongested latency, the mean latency
// of its grants made at low load (at most the first bound in flight), and
// judges windows of eight grants of any kinds by their latencies divided
// by their kinds' uncongested ones (single RPC latencies are heavy-tailed;
// a window's mean moves with the load). The bound starts at Initial (6);
// a window within Tolerance (1.5) raises it, doubling once a round trip
// until the first congestion and then by one, as TCP's slow start and
// congestion avoidance do; one beyond it, or an overload error (deadline
// exceeded, resource exhausted, unavailable), cuts it by Backoff (0.75).
// A grant speaks only for the bound it was made under (Sample.Bound), so a
// change is judged by the grants made after it, not by those it answered.
// The bound settles where latency starts to grow, which is where the
// runtime is saturated but not oversubscribed. Fixed is a constant bound.
//
// On a node whose runtime calls queue for the CPU, latency grows only
// slowly with the grants in flight, and the bound drifts above what keeps
// the cores busy: the extra grants only share the cores, delay every pod
// started with them, and slow an independent relist. An AIMD given the
// node's CPU time (AIMDConfig.CPU; NodeCPU reads /proc/stat) does not
// raise the bound over a window in which the CPU was saturated.
//
// A Controller is safe for concurrent use; Close fails every queued and
// later request with ErrClosed. Grants already held stay valid.
package admission
