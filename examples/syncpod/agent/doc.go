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
// wins); a delete cancels the pod's running sync, removes its containers and
// sandbox and then every per-pod entry (worker, cache, back-off, records);
// Stop cancels syncs and pulls and returns once every goroutine it started
// has; bad manifests give a *ManifestError naming file, document, pod and
// field, and never stop the other pods. Pods use the node's network
// namespace (no CNI). Static pods get a UID derived from namespace/name, so
// an edited manifest updates its pod.
//
// Compared with the kubelet (ModeBaseline reproduces it): no pull blocks a
// worker, a pod's pulls start when the pod is added, the init chain runs
// back to back within a sync and regular containers start concurrently, and
// statuses come from the event stream instead of a 1 s relist.
package agent
