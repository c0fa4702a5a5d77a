// Package agent is the syncpod example's node agent: it runs corev1.Pods on
// a CRI runtime. It is the composition of the library's parts, in the
// kubelet's shape, and the reference for composing them:
//
//   - podworkers runs the pod workers: the agent's pod syncer (workers.go)
//     is its Syncer (SyncPod, SyncTerminatingPod, SyncTerminatedPod, and
//     SyncTerminatingRuntimePod for the orphans RemoveOrphans finds); the
//     PLEG, the image puller and the prober wake a pod by UID, a failed
//     sync is retried after podworkers' back-off, a kill cancels a running
//     sync and is never lost;
//   - criclient/podcri builds the sandbox and container configs, the
//     container hash, labels and annotations, and the corev1.PodStatus;
//   - concurrentstart/podplan turns the pod spec into a start plan that
//     concurrentstart runs, under concurrentstart/admission's node-wide
//     start admission;
//   - asyncpull pulls images without blocking a worker;
//   - pleg (evented, with its relisting safety net) keeps the pods'
//     runtime statuses in statecache, and wakes their workers.
//
// In use:
//
//	a, err := agent.New(client, client)         // a criclient.Client, or any cri-api RuntimeService + ImageManagerService
//	if err != nil { ... }
//	_ = a.Start()
//	defer a.Stop()                              // stops every worker; a.Cleanup(ctx) also removes the pods
//	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod}) // or let a source feed it (package manifest)
//	snap := a.Snapshot()                        // pods, states, startup latencies, PLEG mode and health
//
// Shape, as the kubelet's:
//
//   - The pod workers' phases: SyncPod until the pod is deleted, then
//     SyncTerminatingPod (stop the containers within the grace period,
//     remove them and the sandbox), then SyncTerminatedPod (drop every
//     per-pod entry); a pod added again while it terminates starts a new
//     life once the termination finished.
//   - SyncPod, in order: (1) the pod's runtime status, from the status
//     source; (2) one pure function (actions.go, the kubelet's compute pod
//     actions) computes the pod's complete actions from the pod, that
//     status, the crash-loop back-off and the probes; (3) a pod that must
//     start over is killed, a stale duplicate sandbox removed, a finished
//     pod's sandbox stopped; (4) the sandbox config is built once; (5) in
//     syncpod mode every image of the pod is asked for, without waiting;
//     (6) the sandbox is created if needed; (7) the containers to replace
//     are killed; (8) the init chain, then the regular containers, are
//     started (in baseline mode one init container, or the regular ones
//     one after another, each pulling first).
//   - One runtime layer (runtime.go, the kubelet's kuberuntime) makes every
//     RuntimeService and ImageManagerService call.
//   - The two modes sit behind two small interfaces, chosen once in New:
//     the status source (the evented pleg, or the baseline's 1 s relist)
//     and the sync mode (syncpod mode, or package baseline, which orders a
//     sync as today's kubelet does). No code outside New asks which mode
//     runs.
//
// WithNode says how pods sit on the node, WithTuning sets the bounds and
// periods.
//
// Guarantees: one worker per pod; updates coalesce (the last desired state
// wins); a delete cancels the pod's running sync, stops its containers as
// the kubelet does (regular containers at once with the pod's grace period,
// or the deletion's shorter one, then sidecars in reverse start order, each
// given at least 2 s), removes them and the sandbox and then every per-pod
// entry (worker, cache, back-off, records);
// Stop cancels syncs and pulls and returns once every goroutine it started
// has. Pods use the node's network namespace unless Node.PodNetwork.
// Pods without a UID get StaticPodUID, derived from namespace/name, so an
// edited manifest updates its pod.
//
// Restarts: an agent started on a runtime that holds its earlier run's
// pods (it was killed, not stopped) adopts the pods it is asked for as
// they are, from the runtime's labels: no container restarted, no second
// sandbox (a stale duplicate sandbox is removed, the one running the
// containers kept). RemoveOrphans, called once the pod source has given
// its initial state, removes the pods no longer asked for. Cleanup
// removes everything the agent made, retrying until its ctx ends, then
// names what is left in a *CleanupError. The sandbox and container
// configs come from package podcri.
//
// An adopted pod is reported Adopted, its start the sandbox's creation.
//
// Probes and hooks, as the kubelet runs them: startup, readiness and
// liveness probes (exec through the runtime's ExecSync, httpGet, tcpSocket,
// gRPC; httpGet, tcpSocket and gRPC reach Node.IP, default 127.0.0.1,
// unless they name a host) with their period, timeout, thresholds and initial
// delay; readiness false until its first success, liveness and readiness
// only once the startup probe passed, fresh probes for each container
// instance. They run on a pool of Tuning.ProbeWorkers goroutines shared by
// every pod, never in a pod's sync. A liveness or startup failure kills
// the container (its preStop hook first; event Killing, "Container X failed
// liveness probe, will be restarted") and it restarts through the
// crash-loop back-off. A sidecar's startup probe gates the containers after
// it, and a start-after ":ready" edge waits for the named container's
// readiness. postStart (exec, httpGet, sleep) runs right after the start,
// before the container counts as started; while it runs, the pod's sync
// waits, as the kubelet's does, but in syncpod mode the pod's other
// containers start meanwhile (only what is ordered after it waits); a
// failure kills the container (FailedPostStartHook) to be restarted with
// back-off. preStop runs before every stop of a known pod's container
// (deletion, spec change, probe kill), bounded by the grace period, whose
// rest StopContainer gets (at least 2 s); a failure or overrun gives
// FailedPreStopHook.
//
// Volumes (Node.PodDir): emptyDir (a tmpfs for medium Memory, as root;
// sizeLimit is not enforced on disk), hostPath with the kubelet's type
// checks, and downwardAPI and projected downwardAPI files, written
// atomically and rewritten when the pod's metadata changes; a volume that
// cannot be set up fails only the starts of the containers mounting it,
// with a volume error, and is retried on the next sync. A pod's directory
// goes with its sandbox; an adopting agent keeps it.
//
// API objects (Node.Resources, a PodResources such as the
// virtual-kubelet provider's Resources): configMap and secret volumes and
// projected volumes of serviceAccountToken, configMap, secret and
// downwardAPI sources (the kube-api-access-* volume of every pod of a
// cluster), with items, keys, defaultMode and item modes, and optional (a
// missing optional object gives an empty volume, a missing optional key no
// file; a missing required one fails the volume with the kubelet's
// message). Secret and projected volumes are on a tmpfs when the agent is
// root; otherwise they are written to the pod directory, and the log says
// so once. Every such volume is written as the kubelet's atomic writer
// does (a new ..data version swapped in by rename) at each sync when its
// content changed: the source wakes the pods whose objects changed, and
// the minute resync rewrites a rotated token. Tokens are TokenRequests
// bound to the pod, with the projection's audience and expirationSeconds,
// asked for again once 80% of their life has passed or after 24 h (the
// kubelet's rule without its jitter), the old one kept while the API
// server does not answer and it has not expired. Env: configMapKeyRef and
// secretKeyRef (optional honoured), envFrom with its prefix (invalid names
// skipped with an InvalidEnvironmentVariableNames event), through
// podcri.WithEnvObjects. imagePullSecrets (dockerconfigjson and dockercfg)
// become the pull's CRI AuthConfig: the entry whose registry (host with
// "*" label globs, port, path prefix; docker.io's aliases as one) matches
// the image, the most specific first (the kubelet tries every match in
// turn; the agent the first only); asyncpull dedupes pulls by credential
// and never logs one, nor does the agent. A pod with pull secrets is not
// prefetched before its first sync has read them. Without a PodResources
// a pod that needs one fails its containers' starts saying the API server
// is needed.
//
// Statuses: Agent.Pod gives a pod with the corev1.PodStatus a kubelet
// would report (podcri.PodStatus: phase, conditions, container states and
// the kubelet's waiting reasons, restart counts, IDs), from the agent's
// own state, without a runtime call; WithPodStatusHook delivers each
// change, coalesced, in order, from one goroutine outside the agent's
// locks, and a deleted pod's terminal status once it has stopped. A pod
// that is done (every container finished under Never or OnFailure) has its
// sidecars and sandbox stopped, as the kubelet ends a pod in a terminal
// phase. The virtual-kubelet provider is a front-end over these, as the
// syncpod command is over manifests.
//
// Not done yet: clusterTrustBundle and podCertificate projections, and
// immutable objects' watches are not dropped; preStop hooks of orphaned pods (their spec is
// gone); the crash-loop back-off is kept in memory (as the kubelet keeps
// it), so an adopting agent starts it afresh.
//
// Compared with the kubelet (ModeBaseline reproduces it): no pull blocks a
// worker, a pod's pulls start when the pod is added, the init chain runs
// back to back within a sync and regular containers start concurrently, and
// statuses come from the event stream instead of a 1 s relist.
package agent
