// Package shim is the CRI proxy behind the crishim command: a CRI
// RuntimeService and ImageService server that an unmodified kubelet uses
// in place of its runtime's socket.
//
// # Use
//
//	s, err := shim.New(ctx, "unix:///run/containerd/containerd.sock", shim.Config{
//		Limits: [3]shim.Limits{shim.ClassMutating: {QPS: 20, Burst: 40, MaxInFlight: 8}},
//	})
//	l, err := shim.Listen("unix:///run/syncpod/crishim.sock") // 0660
//	srv := grpc.NewServer()
//	s.Register(srv)
//	go srv.Serve(l)
//	... on SIGTERM: s.Drain(ctx); srv.GracefulStop(); s.Close()
//
// # What it does
//
//   - Every RuntimeService and ImageService method is forwarded; the
//     backend's answers and gRPC codes come back untouched (a method the
//     backend lacks answers Unimplemented, from the backend). Exec,
//     Attach and PortForward return the backend's streaming URL
//     unchanged; the Stream* list calls are relayed.
//   - Admission control per class (read, mutating, image-pull): a token
//     bucket and a FIFO in-flight bound each, so reads never queue behind
//     mutations. GetContainerEvents and the Stream* calls are not held
//     back.
//   - ListPodSandbox and ListContainers are answered from a
//     runtimeview.View: one event stream and a relist every RelistPeriod
//     feed it, every mutation made through the shim is visible to the next
//     List (read-your-writes). A runtime that answers no relist for
//     MaxStaleness is reported down (see "A runtime that does not answer"
//     below) while the reads go on being answered from the last view.
//   - Where each call is answered. From the view: ListPodSandbox,
//     ListContainers (every filter: id, state, sandbox id, labels) and the
//     non-verbose PodSandboxStatus and ContainerStatus of an object the
//     view lists, from the last full status the shim saw (the runtime's
//     events carry the pod's sandbox status and all its container
//     statuses; a forwarded status call fills what no event brought, e.g.
//     after the shim started). A held status older than the view's state
//     (the view lists a later state, say EXITED while the shim holds
//     RUNNING) is refreshed by one forwarded call. Forwarded: verbose
//     status, statuses of ids the view does not list (the kubelet gets the
//     runtime's answer, NotFound, error or timeout), every mutation, Exec,
//     Attach, PortForward, ExecSync, stats (ListPodSandboxStats,
//     ListContainerStats: they change continuously and the view has none),
//     images, RuntimeConfig, and Status and Version within the staleness
//     bound, waiting for the runtime at most that bound. By the shim
//     itself, past the bound or when the runtime did not answer within it:
//     Status (RuntimeReady false, reason RuntimeUnresponsive, the other
//     conditions as last reported: the runtime is down and the shim says so
//     instead of holding the call) and Version (the runtime's last answer:
//     a runtime's name and version do not change while it runs).
//   - Read-your-writes without asking the runtime: a mutation made through
//     the shim is confirmed by its event (containerd sends it as it
//     answers); a List or status read that begins after the mutation was
//     answered waits for that event (never for mutations still in flight,
//     which its caller cannot have seen answered), up to Config.WriteWait
//     (500 ms), then falls back to the view's status-call confirmation
//     (one status call, a relist only for a container whose sandbox is
//     unknown). The kubelet needs this: its pod worker waits for a pod
//     status from a relist that began after its last sync, and trusts it
//     to show what that sync created (a container missing from it would
//     be created again). Stats says how often reads waited
//     and for which mutations the event did not come in time. With the event stream down the fallback is
//     used from the start and status reads of written objects are
//     forwarded. Changes made by others show at once by their event, and
//     at the latest after the next relist (RelistPeriod) when the event was
//     lost. Past MaxStaleness status reads of known objects are answered
//     from the held status, as Lists are.
//   - A call whose caller gave up creates nothing. A mutation still
//     queued (admission, or waiting for its sandbox in async mode) when
//     its caller's context ends is never sent. A CreateContainer already
//     sent is awaited past its caller's end (up to 2 minutes past its
//     deadline), because containerd goes on with a call its client
//     abandoned (on a slow disk it answers minutes later): a container
//     it creates then is removed at once and, from the moment the caller
//     gave up, hidden from ListContainers and the event stream. The
//     kubelet sees what it sees directly on containerd, DEADLINE_EXCEEDED
//     (or CANCELED), and its retry of the same container, with the same
//     attempt, is the pod's one container instead of a second one next to
//     a leftover. Stats counts these (LateCreatesUndone). A create not
//     answered even then is left as it is, to the kubelet's garbage
//     collection. StartContainer, StopContainer and the other mutations
//     are not undone: what a late one did is what the kubelet would have
//     asked for again, and its next relist shows it (a container started
//     late is Running, which the kubelet accepts). A RunPodSandbox of the
//     synchronous modes is not undone either, and its answer is not lost:
//     once sent it is awaited past its caller's end (up to 2 minutes past
//     its deadline), and a sandbox the runtime creates then is kept for
//     the caller's retry, for 2 minutes. The kubelet needs this: having
//     seen no sandbox, it retries with the same metadata and attempt, and
//     directly on containerd that retry fails with "name ... is reserved"
//     (the late sandbox holds the name), so its pod worker backs off
//     (about 18 s after a 4-minute freeze) before a later sync finds the
//     late sandbox. Through the shim a RunPodSandbox with the same
//     metadata (name, namespace, uid, attempt), the same config and the
//     same runtime handler as one the runtime still has joins it (no
//     second call is sent) and gets its answer; one made after the
//     runtime created the sandbox gets its id at once. A call with the
//     same metadata and another config is forwarded, and the runtime
//     answers it. The kept sandbox is dropped once a retry has it, when
//     RemovePodSandbox removes it, or after the 2 minutes; a call whose
//     caller got the answer, and a failed call, are not kept. Stats
//     counts these (SandboxRetriesJoined, AbandonedSandboxes,
//     LateSandboxes).
//   - GetContainerEvents subscribers share the view's one upstream
//     stream, each with its own buffer of EventBuffer events. A subscriber
//     whose buffer is full is ended with RESOURCE_EXHAUSTED (it lost an
//     event and knows it, and the kubelet's evented PLEG then relists and
//     resubscribes); when the runtime's stream breaks all subscribers end
//     with UNAVAILABLE. Nobody else waits for a slow subscriber.
//   - Requests are never logged; registry credentials echoed by a
//     PullImage error are replaced by "[REDACTED]".
//   - Drain refuses new calls (UNAVAILABLE), ends event streams and waits
//     for queued asynchronous calls; the command does it on SIGTERM.
//
// # A runtime that does not answer
//
// When no relist has succeeded for MaxStaleness (runtimeview's 10 s by
// default: containerd frozen, its store locked, its disk stalled):
//
//   - Status answers RuntimeReady false, reason RuntimeUnresponsive,
//     message the view's age and the runtime's last error: at once, and a
//     Status call made just before is answered so once the bound passes,
//     not held until the runtime wakes (the kubelet makes one at a time).
//     The kubelet's runtime check (every 5 s) then sets the Node
//     NotReady with "container runtime not ready: RuntimeReady=false
//     reason:RuntimeUnresponsive ...": the cause named is the runtime.
//     /healthz answers 503 with the same reason.
//   - ListPodSandbox, ListContainers and the non-verbose status reads of
//     listed objects go on being answered, in milliseconds, from the last
//     view: what the runtime last said, updated by every event it sent.
//     The kubelet's relist keeps completing, so its PLEG stays healthy and
//     "PLEG is not healthy" never blames the PLEG for the runtime.
//   - Version is the runtime's last answer, so the kubelet's node status
//     update, which asks for it every time, is not held and reports the
//     NotReady within seconds instead of after the kubelet's 2-minute
//     runtime timeout.
//   - Everything forwarded (writes, verbose status, exec, images, stats)
//     waits for the runtime, as it would without the shim, up to
//     the kubelet's own deadline (runtime-request-timeout, 2 min), which
//     ends it with DEADLINE_EXCEEDED.
//
// Why this is honest: nothing is invented or hidden. The view holds only
// what the runtime reported; while it cannot be confirmed, Status and
// /healthz say so and the Node goes NotReady for that reason, so no new
// pod is scheduled on it. Failing the Lists instead (Config.FailStaleReads)
// makes every kubelet relist fail: the PLEG goes "not healthy" after 3
// minutes and the kubelet blames its PLEG for the runtime. When the
// runtime answers again, the next relist (RelistPeriod) brings the view up
// to date, Status is forwarded again and the Node turns Ready.
//
// # Asynchronous RunPodSandbox (Config.AsyncRunPodSandbox)
//
// RunPodSandbox checks the request (metadata name, namespace and uid; no
// other pending sandbox with the same name/namespace/uid/attempt), queues
// it and returns at once with a sandbox id the shim mints (64 hex digits,
// like containerd's). Workers (AsyncWorkers, also subject to the mutating
// class's limits) make the real call. The shim maps its id to the
// runtime's everywhere: requests naming the sandbox (Stop/Remove/Status,
// CreateContainer, PortForward, stats, checkpoint, filters) and answers
// naming it (List items, statuses, container lists, events, stats,
// metrics). The
// minted id is also stored on the sandbox as the label SandboxIDLabel
// (hidden from every answer), so a restarted shim rebuilds the map from
// the runtime.
//
// What later calls see:
//
//   - CreateContainer, PortForward, PodSandboxStats, UpdatePodSandboxResources,
//     CheckpointPod and stats filters naming the sandbox wait for the real
//     call and fail with its error (same gRPC code and message) if it
//     failed. The wait leaves part of the caller's deadline for the call
//     itself (30 s, at most a quarter of what is left: 90 s of the
//     kubelet's 2 minutes): a sandbox not created by then fails the call
//     with DEADLINE_EXCEEDED ("still being created"), unsent, rather than
//     sending it with no time left for the runtime to answer. The kubelet
//     retries it at its next sync of the pod, as after any failed
//     CreateContainer.
//   - PodSandboxStatus and ListPodSandbox do not wait: a sandbox being
//     created is SANDBOX_READY with no network status; one whose creation
//     failed is SANDBOX_NOTREADY (verbose status Info["crishim"] holds the
//     error), so the kubelet kills and recreates it as it does for a
//     sandbox that died.
//   - StopPodSandbox and RemovePodSandbox of a failed sandbox succeed (there
//     is nothing to stop); Remove forgets it. Of a pending one, they wait.
//
// CRI guarantees this relaxes, exactly:
//
//  1. A successful RunPodSandbox no longer means the sandbox runs: it means
//     the request is valid and queued. Its failure is reported later, to
//     the calls above and as NOTREADY.
//  2. PodSandboxStatus of a sandbox being created reports READY before the
//     runtime has made it, without IP addresses or a network namespace
//     path; the pod IP appears once the real call completed. A kubelet
//     that reads the IP right after RunPodSandbox (for status.podIP) gets
//     it only at its next sync.
//  3. The sandbox id is the shim's, not the runtime's: tools talking to the
//     runtime directly (crictl on containerd's socket) see different ids;
//     through the shim they are consistent.
//  4. Duplicate-name errors for a sandbox still queued come from the shim
//     (ALREADY_EXISTS), others from the runtime, later (as 1).
//  5. The Stream* calls and verbose status Info are relayed untranslated:
//     they carry the runtime's ids.
//  6. The kubelet's CreateContainer, made at once after RunPodSandbox,
//     now also waits for the sandbox (RunPodSandbox's wait moved into
//     it), and can fail with DEADLINE_EXCEEDED before the kubelet's own
//     deadline, unsent (above).
//
// What is kept: call order per sandbox (every call naming it waits for it),
// errors with their codes, the kubelet's recovery path (NOTREADY ⇒
// recreate), and one container per kubelet container: a CreateContainer
// that failed for its caller, by its deadline or the shim's wait, is never
// sent, or is undone when the runtime completed it after all (see "What it
// does"), so the kubelet's retry does not make a second one.
package shim
