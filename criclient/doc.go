// Package criclient is a CRI (Container Runtime Interface) gRPC client that
// drops into any code written against the kubelet's CRI interfaces:
// Client.CRI() is a k8s.io/cri-api/pkg/apis.RuntimeService and
// ImageManagerService.
//
// # Use
//
//	c, err := criclient.Dial(ctx, "unix:///run/containerd/containerd.sock",
//		criclient.WithLogger(logger),
//		// Mutations may not starve reads: each class has its own limits.
//		criclient.WithAdmission(criclient.ClassMutating, criclient.Limits{QPS: 20, Burst: 40, MaxInFlight: 8}),
//		criclient.WithAdmission(criclient.ClassImagePull, criclient.Limits{MaxInFlight: 3}),
//		// Health checks and relists share one List call per 500ms.
//		criclient.WithListSnapshots(500*time.Millisecond),
//	)
//	if err != nil { ... }
//	defer c.Close()
//	id, err := c.RunPodSandbox(ctx, cfg, "")
//	kubeletStyleCode(c.CRI()) // cri-api's RuntimeService and ImageManagerService
//	if status.Code(err) == codes.AlreadyExists { ... }
//
// Endpoints are "unix:///abs/path" or a plain path; WithImageEndpoint sends
// image calls elsewhere. Dial checks the runtime answers Version unless
// WithoutVersionCheck is given.
//
// # Guarantees
//
//   - Timeouts as in the kubelet: every call 2 minutes (WithTimeout),
//     RunPodSandbox twice that, StopContainer and ExecSync that plus their
//     own grace/timeout (ExecSync with timeout 0: none, as in the kubelet),
//     PullImage and GetContainerEvents none; any method
//     can be overridden with WithMethodTimeout. errors.Is(err, ErrTimeout)
//     tells the client's timeout from the caller's own deadline.
//   - Errors are *CallError values naming the method; status.Code(err),
//     status.FromError, errors.Is and errors.As see the runtime's error.
//   - gRPC messages up to 16 MiB each way (WithMaxMessageSize).
//   - Admission control (WithAdmission) per Class (ClassRead,
//     ClassMutating, ClassImagePull): a token bucket (golang.org/x/time/rate
//     on the client's clock) and a FIFO max-in-flight bound
//     (golang.org/x/sync/semaphore). A call over the limits waits; the wait
//     ends with the caller's context (or Close) and is reported to the
//     observer as Event.QueueWait. The per-call timeout starts after admission, so
//     bound the wait with ctx. GetContainerEvents is never held back.
//     Nothing is limited by default.
//   - List snapshots (WithListSnapshots(maxAge), off by default):
//     ListPodSandbox and ListContainers are answered from a shared,
//     unfiltered list with the caller's filter applied locally, exactly as
//     containerd and CRI-O apply it. Concurrent refreshes are merged into one
//     runtime call (golang.org/x/sync/singleflight). Every answer comes from
//     a runtime call that started no more than maxAge before the answered
//     call began, and after every mutation made through this client that had
//     returned by then and can change that list (a RunPodSandbox does not
//     change the container list; see ClassMutating). Age is counted from
//     when the refresh started, not from when it returned. Past maxAge/2 a
//     snapshot is refreshed in the background while it is still served, so
//     callers rarely wait for the runtime. Changes made by others (a
//     container exiting, another client) show up within maxAge. Refreshes
//     run on the client's own context, not a caller's (one caller giving up
//     does not fail the others), so they carry no caller gRPC metadata.
//     The observer sees every hit (SnapshotServed).
//   - Registry credentials (AuthConfig) never appear in logs or errors;
//     use RedactAuth or AuthField to print one yourself.
//   - Close is idempotent, cancels and waits for background refreshes, and
//     makes later calls, and calls waiting for admission, fail with
//     ErrClosed. cri-api's Close(ctx) is CRI's; the ctx cannot bound
//     anything, so the Client's own Close takes none.
//   - Misuse is a typed error, never a panic: a bad endpoint or option is a
//     *ConfigError from Dial; a nil ctx, or a Client Dial did not return,
//     an *ArgError.
//   - WithObserver(func(Event)) is told of every call (CallAdmitted,
//     CallFinished) synchronously, outside the client's locks, from the
//     calling goroutine.
//
// # How it beats the kubelet's client
//
// The kubelet's remote runtime client sends every call straight to the
// runtime: during a burst of RunPodSandbox calls, containerd's store lock
// makes every List wait for the mutations in flight, so the PLEG relist and
// the health checks stall with them, and every component that lists pays its
// own runtime call. criclient bounds each class of calls separately and
// serves all Lists of a period from one runtime call. On crisim's store-lock
// model with 100 listers and 50 RunPodSandbox in flight, p99 ListContainers
// latency drops from 623 ms (plain gRPC) to 7 ms with WithListSnapshots(1s),
// 50x to 163x across runs, and the runtime sees 1.4 List calls per burst
// instead of 101 (criclient/benchmarks.txt, BenchmarkListDuringSandboxBurst).
//
// # Testing
//
// Package criclient/crisim serves a simulated CRI runtime over real gRPC on
// a unix socket; Dial its Endpoint.
package criclient
