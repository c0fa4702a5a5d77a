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
//		provider.WithNodeIP("10.0.0.5"), provider.WithPodLogDir("/var/log/pods"),
//		provider.WithPodDir("/var/lib/syncpod/pods"), provider.WithKubeClient(kube))
//	if err != nil { ... }
//	defer p.Close()
//	pc, _ := node.NewPodController(node.PodControllerConfig{Provider: p, ...})
//	go pc.Run(ctx, 4) // calls p.NotifyPods, then CreatePod, DeletePod ...
//
// For a test or a demo, crisim.Start gives a simulated runtime to Dial;
// cmd/syncpod-vk runs a whole virtual node against a kubeconfig.
//
// # What it is
//
// A thin adapter: the pods run on the syncpod node agent
// (examples/syncpod/agent), the same pod worker the syncpod command runs
// static pods with. CreatePod, UpdatePod and DeletePod become the agent's
// pod updates; GetPod, GetPodStatus and GetPods read the agent's status
// (Agent.Pod); NotifyPods receives the agent's status hook. The statuses
// are podcri.PodStatus's, which both front-ends report.
//
// # What it guarantees
//
//   - CreatePod and UpdatePod validate the pod (errdefs.InvalidInput) and
//     return at once: virtual-kubelet calls them on its few sync workers,
//     so nothing there waits for the runtime. The agent's worker for the
//     pod creates the sandbox, pulls the images (asyncpull: deduplicated,
//     limited, with the kubelet's back-off; no pull blocks the worker) and
//     starts the containers as a podplan: init containers back to back,
//     sidecars gating what follows once started, regular containers
//     concurrently, under a node-wide start admission.
//   - The worker is woken by PLEG events (the runtime's event stream, or
//     relists when there is none), by spec updates and by its own
//     back-off timers, and never acts on state older than its own last
//     change.
//   - GetPod, GetPodStatus and GetPods answer from the agent's state
//     without calling the runtime, and return copies. Unknown pods give
//     errdefs.NotFound.
//   - NotifyPods' callback is called from one goroutine, outside every
//     provider and agent lock, with the latest status of each changed pod:
//     statuses of one pod coalesce (latest wins) and arrive in order, and
//     the callback may call back into the provider.
//   - DeletePod forgets the pod at once (GetPod answers NotFound), cancels
//     its pulls, stops its containers as the kubelet does (the pod's grace
//     period, or the deletion's, capped by WithMaxGracePeriod; sidecars
//     after the regular containers, in reverse start order), then notifies
//     its terminal status (Succeeded if every container exited 0, else
//     Failed, every container terminated, with the deletion timestamp it
//     was given) and removes its sandbox. Nothing else is notified for it
//     after DeletePod.
//   - Statuses read as kubectl shows a kubelet's: phases by the kubelet's
//     rules; container states with ContainerCreating, PodInitializing,
//     ErrImagePull, ImagePullBackOff, CrashLoopBackOff (10s doubling to
//     300s), CreateContainerConfigError, CreateContainerError,
//     RunContainerError, Completed, Error; the conditions
//     PodReadyToStartContainers, Initialized, ContainersReady and Ready
//     with their reasons and stable transition times; start times, restart
//     counts, last termination states, image IDs and container IDs
//     (containerd://...).
//   - Pods that are not hostNetwork use the runtime's pod network (its
//     CNI), with their sandbox's IP; a finished pod's sandbox is stopped.
//   - Close leaves the pods running; a provider started again adopts them,
//     without restarting a container, as virtual-kubelet creates them
//     again.
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
// # Feature table: the kubelet and syncpod-vk
//
// The node's kubelet API (cmd/syncpod-vk serves it with virtual-kubelet's
// node/api routes and the methods below):
//
//	feature       upstream kubelet                        syncpod-vk (this provider)
//	------------  --------------------------------------  --------------------------------------------
//	logs          CRI log file of the container (path     the same: ContainerStatus's log path, read
//	              from ContainerStatus), k8s.io/cri-      by k8s.io/cri-client's ReadLogs; follow,
//	              client's reader: follow, tail, since,   tail, since, timestamps, previous, limit;
//	              timestamps, previous, limitBytes; the   tailLines=0 reads as "all" (virtual-kubelet
//	              files rotated (containerLogMaxSize)     cannot tell it from unset); no rotation
//	exec          CRI Exec URL, the API server's stream   CRI Exec URL, streamed with client-go's
//	              proxied (or redirected) to it           SPDY executor; exit code, tty and resize
//	attach        CRI Attach URL, proxied                 CRI Attach URL, SPDY; tty and resize
//	port-forward  CRI PortForward URL, proxied            CRI PortForward URL: one SPDY connection per
//	                                                      forwarded connection (data + error streams)
//	stats         /stats/summary from cAdvisor or CRI     /stats/summary from ListContainerStats and
//	              stats (pods, containers, node, fs,      ListPodSandboxStats (pods: their containers'
//	              network, volumes); /metrics/resource    sums where the runtime fails sandbox stats),
//	                                                      the node's CPU and memory from /proc; no
//	                                                      fs, network or volume stats;
//	                                                      /metrics/resource with the kubelet's names
//	authn/authz   TLS; x509 client CA, TokenReview,       TLS (given or self-signed certificate); x509
//	              SubjectAccessReview on nodes/proxy,     client CA, TokenReview, SubjectAccessReview
//	              stats, metrics, log; anonymous is       on nodes/proxy, stats, metrics, log; no
//	              configurable                            anonymous access
//
// # Pod resources from the API server
//
// With WithKubeClient (syncpod-vk passes its client) the pods get what
// they reference through Resources, the agent's PodResources:
//
//   - volumes: configMap, secret (on a tmpfs as root) and projected
//     (serviceAccountToken, configMap, secret, downwardAPI: the
//     kube-api-access-* volume), items, modes and optional honoured,
//     rewritten atomically (..data swap) when a watched object changes;
//     kubelet: the same, its configMap and secret managers watch-based;
//   - env: valueFrom configMapKeyRef and secretKeyRef, envFrom with its
//     prefix, invalid keys skipped as the kubelet does;
//   - imagePullSecrets: the CRI AuthConfig of the pull, matched to the
//     image's registry as the kubelet's keyring does (simplified: the most
//     specific entry only, where the kubelet tries each match);
//   - tokens: TokenRequests bound to the pod, rotated at 80% of their life
//     or after 24 h, as the kubelet's token manager (without its jitter).
//
// Each configMap or secret a pod references has a watch of its own (list
// and watch by metadata.name), started with the first pod that references
// it and stopped with the last, as the kubelet's watch-based managers.
// The node needs to get, list and watch those objects and to create
// tokens (the node authorizer's grants for a kubelet).
//
// # Not supported
//
// What the agent does not do (its package doc): clusterTrustBundle and
// podCertificate projections, ephemeral containers, activeDeadlineSeconds;
// in the kubelet API, filesystem, network and volume stats, rotated log
// files and /metrics/probes, /metrics/cadvisor, /checkpoint, /debug.
package provider
