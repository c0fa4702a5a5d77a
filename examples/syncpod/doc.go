// Command syncpod is the reference SyncPod orchestrator: a small node agent
// that runs pods the way a custom kubelet or an edge agent would, built only
// from syncpod's packages. It is the place to start reading.
//
// # Run it
//
//	go run ./examples/syncpod
//
// needs no set-up: it starts an embedded simulated runtime (crisim, with
// containerd-like latencies, three download slots and its store lock) and
// runs a demo burst on it: 20 web pods (an init container, a log sidecar,
// two app containers) over eight images, a worker pod on a 1.2 GB image that
// must not hold the others up, and a pod that crash-loops. A terminal shows
// a live line (pods running N/M, pulls in flight, PLEG mode and health);
// then a table per pod (startup latency, pull wait, restarts, state) and the
// p50/p90/p99 startup latencies. Compare with
//
//	go run ./examples/syncpod --mode=baseline
//
// which runs the same pods the way today's kubelet does.
//
// To install it on a node, build it static and stripped, without gRPC's
// request tracing (its grpcnotrace build tag; the agent never turns that
// tracing on, and it brings html/template):
//
//	CGO_ENABLED=0 go build -tags grpcnotrace -trimpath -ldflags='-s -w' ./examples/syncpod
//
// Other flags:
//
//	--manifests DIR        run the pods of DIR (corev1.Pod YAML or JSON, one or
//	                       many per file, "---" documents or a v1 List) and
//	                       watch it: adding, changing or deleting a file
//	                       creates, updates or kills its pods; a bad file is
//	                       reported with its file, document, pod and field,
//	                       and the other pods carry on. On the simulated
//	                       runtime any image reference is pullable, and an
//	                       init container runs for 500 ms unless the pod
//	                       annotation "crisim.syncpod.io/exit-after.NAME" says.
//	--runtime-endpoint E   drive a real CRI runtime, e.g.
//	                       unix:///run/containerd/containerd.sock
//	--mode M               syncpod (default) or baseline
//	--json                 the summary as JSON, for machines
//	--log-level L          zap logs on stderr (debug shows every step)
//	--metrics-addr A       serve Prometheus metrics on A/metrics: pod startup
//	                       latency histogram, image pulls and their duration,
//	                       PLEG relist duration, PLEG health
//	--cleanup              on exit, remove the pods this agent made (always
//	                       done on the embedded runtime); failed removals are
//	                       retried until --cleanup-timeout (default 5m), then
//	                       the pods left are named and the exit status is 1
//	--pod-dir D            the pods' volumes (emptyDir, downwardAPI) and
//	                       termination-message files, under D/<pod UID>
//	                       (default /var/lib/syncpod/pods; the embedded
//	                       runtime uses a temporary directory unless given)
//
// SIGINT or SIGTERM stops every worker (running syncs and pulls are
// cancelled), the PLEG and the metrics server, and prints the summary.
//
// # What it shows
//
// Package agent (examples/syncpod/agent) holds the orchestrator; this
// command is its CLI. In syncpod mode a pod's life is:
//
//   - The manifest source (fsnotify, debounced) hands Agent.Apply an
//     add, update or delete. The pod's worker (one goroutine per pod, a
//     1-slot wake channel, the last desired state wins, deleting cancels the
//     running sync) is started or woken. The pod's images are handed to
//     asyncpull at once.
//   - Each sync reads the pod's status from a statecache kept current by the
//     pleg package on the runtime's event stream (relisting while the stream
//     is down), computes its actions like the kubelet's computePodActions
//     (create the sandbox if missing or not ready, kill containers not in
//     the spec or whose spec changed, restart per restartPolicy with the
//     kubelet's crash-loop back-off, 10 s doubling to 5 min), and runs its
//     starts as a concurrentstart plan built by podplan: init containers in
//     order, sidecars gating what follows, regular containers concurrently.
//   - No sync waits: asyncpull's Ensure returns at once and wakes the worker
//     when the pull ends; an init container's exit arrives as a PLEG event.
//     What the worker has just done and the event-fed cache does not show
//     yet is kept as an expectation, so it never creates a sandbox or starts
//     a container twice (the evented PLEG's duplicate-container bug).
//   - Per-pod report state sits under locks.KeyedMutex.
//
// The baseline mode, written in the example because it is the comparison
// and not library code, is today's kubelet: pulls serialized node-wide and
// blocking the worker, containers started one after another, one init step
// per sync, a 1 s relisting PLEG that inspects changed pods one by one, and
// every sync waiting in GetNewerThan for a relist newer than the last sync.
//
// examples/bench runs both modes on named scenarios and compares them with
// the lower bound a perfect orchestrator could reach.
package main
