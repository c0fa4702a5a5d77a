// Package agent is the syncpod example's node agent: it runs corev1.Pods on
// a CRI runtime, composed from syncpod's packages (asyncpull, pleg,
// statecache, concurrentstart/podplan, locks), or, in ModeBaseline, the way
// today's kubelet does, for comparison.
//
//	a, err := agent.New(client, client)         // a criclient.Client, or any cri-api RuntimeService + ImageManagerService
//	if err != nil { ... }
//	_ = a.Start()
//	defer a.Stop()                              // stops every worker; a.Cleanup(ctx) also removes the pods
//	src := agent.NewManifestDir("/etc/pods", a.Apply)
//	go src.Run(ctx)                             // or a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
//	snap := a.Snapshot()                        // pods, states, startup latencies, PLEG mode and health
//
// Guarantees: one worker per pod; updates coalesce (the last desired state
// wins); a delete cancels the pod's running sync, stops its containers as
// the kubelet does (regular containers at once with the pod's grace period,
// or the deletion's shorter one, then sidecars in reverse start order, each
// given at least 2 s), removes them and the sandbox and then every per-pod
// entry (worker, cache, back-off, records);
// Stop cancels syncs and pulls and returns once every goroutine it started
// has; bad manifests give a *ManifestError naming file, document, pod and
// field, and never stop the other pods. Pods use the node's network
// namespace (no CNI). Static pods get a UID derived from namespace/name, so
// an edited manifest updates its pod.
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
// Volumes (WithPodDir): emptyDir (a tmpfs for medium Memory, as root;
// sizeLimit is not enforced on disk), hostPath with the kubelet's type
// checks, and downwardAPI and projected downwardAPI files, written
// atomically and rewritten when the pod's metadata changes; a volume that
// cannot be set up fails only the starts of the containers mounting it,
// with a *VolumeError, and is retried on the next sync. A pod's directory
// goes with its sandbox; an adopting agent keeps it.
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
// Not done yet: probes, lifecycle hooks, and the volumes that need the API
// server (configMap, secret, service-account tokens: a pod using one
// fails those containers' starts with a message saying so); the crash-loop
// back-off is kept in memory (as the kubelet keeps it), so an adopting
// agent starts it afresh.
//
// Compared with the kubelet (ModeBaseline reproduces it): no pull blocks a
// worker, a pod's pulls start when the pod is added, the init chain runs
// back to back within a sync and regular containers start concurrently, and
// statuses come from the event stream instead of a 1 s relist.
package agent
