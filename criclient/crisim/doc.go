// Package crisim is a simulated CRI runtime that serves the real CRI gRPC
// services (k8s.io/cri-api runtime/v1 RuntimeService and ImageService) on a
// unix socket, so the code under test talks real gRPC to something that
// behaves like containerd 2.x — with latency, contention, an event stream
// and faults you control.
//
// # In a test
//
//	srv, err := crisim.Start(
//		crisim.WithImage("busybox:1.36", 2<<20),          // present on the node
//		crisim.WithRegistryImage("nginx:1.27", 60<<20),   // pullable
//		crisim.WithPullBandwidth(100<<20),                // 100 MiB/s per download
//	)
//	if err != nil { t.Fatal(err) }
//	t.Cleanup(func() { srv.Close() })
//	c, _ := criclient.Dial(ctx, srv.Endpoint())           // or grpc.NewClient(srv.Endpoint(), ...)
//	rt := srv.Runtime()                                   // faults and counters
//	events, _ := c.GetContainerEvents(...)                // then rt.WaitSubscribers(ctx, 1) before acting
//	rt.FailNext("StartContainer", 1, status.Error(codes.Unavailable, "boom"))
//	... exercise your component through c ...
//	if n := rt.Calls("ListContainers"); n > 1 { t.Errorf("made %d List calls", n) }
//
// New returns the Runtime alone (it implements RuntimeServiceServer and
// ImageServiceServer) for in-process use or for your own grpc.Server
// (Runtime.Register). New and Start refuse a bad option (a nil clock, a
// negative bound, size or latency) with a *ConfigError naming it; 0 keeps
// each option's documented default. The Runtime's other methods refuse a
// bad argument (a nil ctx, a negative count or duration) with an *ArgError
// and change nothing. A Runtime or Server that New or Start did not make
// (a zero value) never panics: its methods return an *ArgError saying to
// use New or Start, its counters are zero and Close returns nil.
//
// # What is modelled
//
//   - Pod sandboxes (READY, NOTREADY), containers (CREATED, RUNNING, EXITED)
//     with created/started/finished times, exit codes and reasons, images
//     with sizes. StopPodSandbox stops its containers; RemovePodSandbox
//     removes them. Unknown ids give codes.NotFound (Remove* succeed, as the
//     CRI requires); a nil config or missing metadata gives
//     codes.InvalidArgument; a reused name gives codes.AlreadyExists;
//     starting a non-CREATED container gives codes.FailedPrecondition;
//     creating a container from an image that is not present gives
//     codes.NotFound. Methods not modelled (streaming Exec and Attach,
//     stats, checkpoints, ...) give codes.Unimplemented.
//   - ExecSync runs a command in a running container: by default it exits
//     0 with no output; Runtime.SetExecHandler plays the process (output,
//     exit code, how long it takes). As on containerd, an unknown container
//     gives codes.NotFound, one not running codes.FailedPrecondition, and a
//     command still running when the request's Timeout (on the runtime
//     clock) passes is ended and gives codes.DeadlineExceeded.
//   - A container scripts its own run with annotations on its
//     ContainerConfig: AnnotationExitAfter ("2s") and AnnotationExitCode
//     ("1") make it exit on its own; AnnotationStopExitCode sets the code
//     when it is stopped; AnnotationStartError makes StartContainer fail
//     (exit code 128, reason StartError). Runtime.ExitContainer ends one
//     from the test.
//   - Images: ImageStatus of an absent image returns a nil image (not an
//     error); PullImage of a present image costs only the call latency, of a
//     registry image size/bandwidth (WithPullBandwidth) with at most
//     WithMaxConcurrentDownloads downloads at once, of an unknown reference
//     codes.NotFound. References are normalised like the kubelet's.
//   - GetContainerEvents streams CREATED, STARTED, STOPPED and DELETED events
//     to any number of subscribers, each with PodSandboxStatus and the
//     statuses of all the pod's containers, as containerd 2.x sends them;
//     sandbox events carry the sandbox id as container_id; the sandbox's
//     DELETED event carries its last (NOTREADY) status. Each subscriber has
//     its own buffer (DefaultEventBuffer, 100, like containerd); when it is
//     full the subscriber loses that event (EventsLost counts it), so a slow
//     reader never slows the runtime, as in containerd.
//   - Latency per method (WithLatency with Fixed, Uniform, LogNormal, or your
//     own Latency), seeded by WithSeed; WithRealisticLatencies sets
//     containerd-like values for every modelled method.
//   - Contention: WithMaxConcurrency caps the calls worked on at once;
//     WithStoreLock makes List calls queue behind the sandbox and container
//     mutations in flight, which hold the store for their latency.
//
// A call goes through the model in this order: counted; refused if the
// runtime is closed; refused with ErrInvalidArgument if its ctx is nil;
// held by a Stall; hung by HangNext; failed by FailNext or
// SetErrorRate; queued for a WithMaxConcurrency slot; queued for the store
// lock; the method's latency; then the state change. PullImage gives its slot
// back before downloading.
//
// # Faults
//
// All per-method controls take the CRI method name (Methods lists them; an
// unknown name has no effect; a negative count or duration is an *ArgError):
//
//   - FailNext(method, n, err): the next n calls return err (a gRPC status
//     error keeps its code over the wire; 0 clears the queue).
//   - SetErrorRate(method, rate, code): each call fails with probability
//     rate (0..1), seeded.
//   - HangNext(method, n): the next n calls block until their context ends
//     (codes.DeadlineExceeded or codes.Canceled) or the runtime closes.
//   - Stall(d): every call arriving in the next d blocks until the window
//     ends (a runtime frozen by I/O or a restart).
//   - CutEventStreamsAfter(n): event streams end with codes.Unavailable after
//     n more events (0: now; negative: off).
//   - DropNextEvents(n): the next n events reach no subscriber.
//   - ExitContainer(id, code): a running container's process exits.
//
// # Counters
//
// Calls, CallCounts and ResetCalls count calls per CRI method (failed ones
// included), InFlight and MaxInFlight tell how many calls of a method were
// inside the runtime at once (waiting ones included), Downloads how often an
// image was really downloaded, Subscribers and WaitSubscribers how many event
// streams are open, EventsLost how many events were lost.
//
// Errors returned in-process are *Error values: errors.Is works with
// ErrNotFound, ErrAlreadyExists, ErrInvalidArgument, ErrFailedPrecondition,
// ErrClosed and ErrInjected, and status.Code gives the gRPC code a remote
// client sees.
//
// # Guarantees
//
// Every method is safe for concurrent use. Latencies, stalls, hangs and
// queues are waited out without holding the state lock, so one slow call
// never serialises the others (cri-api's fake runtime holds one mutex
// around every call and returns from GetContainerEvents at once, so it can
// show neither contention nor events). Events are published in the order of
// the state changes. Time comes from an injectable clock (WithClock): with
// k8s.io/utils/clock/testing's fake clock, scripted exits, pulls, stalls and
// latencies advance only when the test steps the clock. Close ends hung
// calls, stalls and event streams, stops timers and leaves no goroutine
// behind.
//
// # In a benchmark
//
//	srv, _ := crisim.Start(crisim.WithRealisticLatencies(), crisim.WithStoreLock(), crisim.WithSeed(42))
//
// gives a runtime whose List calls slow down during a burst of pod creations
// the way containerd's do, reproducibly, without a real node.
package crisim
