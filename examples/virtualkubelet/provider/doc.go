// Package provider is a virtual-kubelet provider (node.PodLifecycleHandler
// and node.PodNotifier of github.com/virtual-kubelet/virtual-kubelet
// v1.14) that runs pods on any CRI runtime, built from syncpod's
// packages: criclient (or any cri-api RuntimeService/ImageManagerService),
// pleg, statecache, asyncpull, concurrentstart and podplan.
//
// # Use
//
//	cri, _ := criclient.Dial(ctx, "unix:///run/containerd/containerd.sock")
//	p, err := provider.New(ctx, cri, cri,
//		provider.WithNodeIP("10.0.0.5"), provider.WithPodLogDir("/var/log/pods"))
//	if err != nil { ... }
//	defer p.Close()
//	pc, _ := node.NewPodController(node.PodControllerConfig{Provider: p, ...})
//	go pc.Run(ctx, 4) // calls p.NotifyPods, then CreatePod, DeletePod ...
//
// For a test or a demo, crisim.Start gives a simulated runtime to Dial;
// cmd/syncpod-vk runs a whole virtual node against a kubeconfig.
//
// # What it guarantees
//
//   - CreatePod and UpdatePod validate the pod (errdefs.InvalidInput) and
//     return at once: virtual-kubelet calls them on its few sync workers,
//     so nothing there waits for the runtime. Each pod has its own worker
//     goroutine that creates the sandbox, pulls the images through
//     asyncpull (deduplicated, limited, with the kubelet's back-off) and
//     starts the containers as a podplan: init containers in order,
//     sidecars (restartable init containers) gating what follows once
//     started, regular containers all at once.
//   - The worker is woken by PLEG events (the runtime's event stream, or
//     relists when there is none), by spec updates and by its own
//     back-off timers; before acting it waits until the PLEG's cache
//     reflects its previous actions (statecache GetNewerThan), so it never
//     acts on state older than its own last change.
//   - GetPod, GetPodStatus and GetPods answer from a status cache without
//     calling the runtime, and return copies. Unknown pods give
//     errdefs.NotFound.
//   - NotifyPods' callback is called from one goroutine, outside every
//     provider lock, with the latest status of each changed pod: statuses
//     of one pod coalesce (latest wins) and arrive in order, and the
//     callback may call back into the provider.
//   - DeletePod forgets the pod at once (GetPod answers NotFound), cancels
//     its pulls, stops its containers with the pod's grace period (capped
//     by WithMaxGracePeriod), stops and removes its sandboxes, and then
//     notifies its terminal status: Succeeded if every container exited
//     0, else Failed, every container terminated, with the deletion
//     timestamp it was given.
//   - Statuses read as kubectl shows a kubelet's: phases by the kubelet's
//     rules; container states with ContainerCreating, PodInitializing,
//     ErrImagePull, ImagePullBackOff, CrashLoopBackOff (10s doubling to
//     300s), CreateContainerError, RunContainerError, Completed, Error;
//     the conditions PodReadyToStartContainers, Initialized,
//     ContainersReady and Ready with their reasons and stable transition
//     times; start times, restart counts, last termination states, image
//     IDs and container IDs (containerd://...).
//   - A failed pull is shown as ErrImagePull until the next sync after
//     WithErrorResync, then as ImagePullBackOff until its back-off ends.
//
// Containers get the kubelet's io.kubernetes.* labels, so crictl shows the
// pods as a kubelet's. AnnotationContainerAnnotations gives containers CRI
// annotations of their own (crisim's scripted exits, for instance).
//
// # Compared with virtual-kubelet/cri and the kubelet
//
// The CRI provider of the virtual-kubelet project relists every sandbox
// and container on each call, pulls inline in CreatePod (blocking a sync
// worker for the whole pull), and has no event stream or cache. The
// kubelet advances a pod one init container per sync and starts regular
// containers one after another, each behind its own image pull. Here the
// runtime is listed by the PLEG only, status reads never reach the
// runtime, pulls never block anything but the container that needs the
// image, and a pod's start costs its critical path.
//
// # Not supported
//
// Probes (a running container is ready), lifecycle hooks, volumes other
// than what the runtime gives, ephemeral containers, activeDeadlineSeconds,
// logs, exec, attach and port-forward, resource limits, and adopting pods
// left in the runtime by an earlier provider process.
package provider
