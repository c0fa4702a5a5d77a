// Package asyncpull is an image-pull scheduler for kubelet-like agents that never blocks a
// pod's sync on a pull.
//
// # Use
//
//	s, err := asyncpull.New(imageService,       // criclient.Client, cri-api's fake, ...
//		asyncpull.WithMaxParallel(3),
//		asyncpull.WithNotify(func(uid types.UID) { podWorkers.Wake(uid) }))
//	if err != nil {
//		return err // *ConfigError: a nil service or an option out of range
//	}
//	defer s.Close()
//
//	// In syncPod, for each container image:
//	res := s.Ensure(podCtx, asyncpull.Request{Image: c.Image, PullPolicy: asyncpull.PullIfNotPresent,
//		Auth: auth, PodSandboxConfig: sandboxConfig, PodUID: pod.UID})
//	switch res.State {
//	case asyncpull.StatePresent:               // create the container with res.ImageRef
//	case asyncpull.StateQueued, asyncpull.StatePulling: // return; the pod is woken when done
//	case asyncpull.StateBackOff:               // res.Reason == "ImagePullBackOff"; woken at res.BackOffUntil
//	case asyncpull.StateFailed:                // res.Reason is the kubelet's reason string
//	}
//	// On pod deletion:
//	s.Cancel(pod.UID)
//
// Ensure returns at once and makes no runtime call itself. When the result for a pod is ready,
// the pod is woken (WithNotify callback, or a per-pod Subscribe channel) and its next Ensure
// returns the result. A pod told StateBackOff is woken the same way when the back-off ends,
// and its next Ensure starts the retry: pod workers arm no timers. Callers that want to block
// use Wait.
//
// # Guarantees
//
//   - Dedupe: concurrent requests for one image share one PullImage. The key is the reference
//     normalised with github.com/distribution/reference ("nginx", "docker.io/library/nginx"
//     and "docker.io/library/nginx:latest" are one image) plus a keyed hash of the credentials,
//     so a pull made with pod A's secret never satisfies pod B with other or no credentials
//     (WithCredentialPolicy(ShareCredentials) turns that off). The runtime is sent the fully
//     qualified reference.
//   - Limits: a node-wide MaxParallel (1 reproduces the kubelet's serial puller), per-registry
//     limits, and a QPS/burst token bucket (kubelet defaults 5/10) that queues pulls instead of
//     rejecting them. Held-back pulls (registry or large-image limits) are skipped, never
//     waited for, so they do not block the queue behind them.
//   - Order: a pluggable QueuePolicy; FIFOPolicy (default), PriorityPolicy with aging, and
//     SmallestFirstPolicy with a maximum wait. WithLargeImageLimit keeps huge images from
//     holding every slot.
//   - Back-off per (image, credentials): 10s doubling to 300s, reset by a success, idle entries
//     dropped. When a back-off ends, exactly the pods that met it (Ensure answered StateBackOff)
//     and are still interested (context not done, no Cancel) are woken, once; not after Close.
//     All back-offs share the dispatcher's single clock timer: no goroutine or timer per entry.
//     Errors are *PullError values classified as ErrNotFound, ErrUnauthorized,
//     ErrRegistryUnavailable, ErrTimeout, ErrCanceled or ErrPullFailed, wrapping the
//     runtime's error (errors.Is and errors.As work, gRPC status survives). Bad input gives a
//     *RequestError (ErrInvalidImageName, ErrInvalidRequest) without any runtime call.
//   - Cancellation: a request's interest ends with its context or Cancel(podUID); a pull that
//     nobody waits for any more is removed from the queue or has its CRI call cancelled.
//     WithPullTimeout bounds a single pull.
//   - Notifications never block the scheduler and are never lost: a pod is marked "dirty" in
//     a set (one entry per pod, however many results and back-off expiries) and channels have
//     capacity one, so a slow consumer only delays its own wake-ups; the results (and a
//     "retry due" mark for an ended back-off) wait in the scheduler until the pod's next
//     Ensure for the image collects them.
//   - Time (QPS, back-off and its wake-ups, aging, deadlines) comes from an injectable
//     k8s.io/utils/clock.
//   - Observability: WithObserver receives queue waits, pull durations, sizes, dedupe hits,
//     back-offs and cancellations; Stats returns a consistent snapshot of the queue, running
//     pulls, waiting pods and back-offs with cumulative counters, for a progress line or a
//     metrics exporter; WithLogger logs with zap. Credentials never appear in logs,
//     errors, events or in Request's String, GoString, JSON and zap encodings.
//   - Close cancels everything, waits for every goroutine the scheduler started, ends every
//     Subscription (its channel closes, Err is ErrClosed) and is idempotent; later calls
//     return ErrClosed.
//   - Misuse: New refuses a nil or typed-nil image service and out-of-range options with a
//     *ConfigError (WithMaxParallel(0) is unlimited, negative values are refused); a nil
//     context is an *ArgError. A panic inside the image service (a zero-value fake with nil
//     maps) fails that pull or presence check with a *PanicError instead of killing the
//     process. Pacing uses golang.org/x/time/rate; back-off follows internal/backoff.
//
// # Compared with the kubelet
//
// The kubelet's pod worker blocks in EnsureImageExists until the pull ends; a pod's images are
// pulled one after another; the default serial puller lets one huge image hold every other pod;
// concurrent pulls of one image are not merged (kubernetes#125164); pulls of deleted pods run
// to the end (#106675); a pull over the QPS limit fails instead of waiting; and a pod in
// ImagePullBackOff is re-synced on its worker's own ~10s error back-off, polling an image
// back-off of up to 300s instead of being woken when it ends. asyncpull fixes each of these;
// see asyncpull/benchmarks.txt for a simulated 50-pod burst.
package asyncpull
