// Command syncpod-vk runs a virtual node whose pods run on a CRI runtime
// through syncpod's building blocks: by default an in-process simulated
// runtime (crisim), or a real one (containerd, CRI-O) with -cri-endpoint.
//
//	syncpod-vk -kubeconfig ~/.kube/config -nodename syncpod-vk
//	syncpod-vk -kubeconfig ~/.kube/config -cri-endpoint unix:///run/containerd/containerd.sock -pod-log-dir /var/log/pods
//
// The node registers itself (with the taint virtual-kubelet.io/provider=syncpod:NoSchedule
// unless -taint=false), reports its own status as a kubelet does (capacity
// and allocatable, the host's unless -cpu, -memory, -ephemeral-storage, -pods
// say, less -system-reserved and -kube-reserved; the pressure conditions and
// Ready, naming the runtime when it is down; addresses; nodeInfo with the CRI
// Version; a Lease renewed while the process runs: see README.md, Node
// status), watches the pods scheduled to it and reports their
// statuses. With -nodes N one process runs N such nodes, each on its own
// simulated runtime, to load a control plane as kubemark's hollow nodes
// do. The node's kubelet API (kubectl logs, exec, attach, port-forward,
// /stats/summary and /metrics/resource) is served over TLS on
// -kubelet-api-address, with the kubelet's webhook authentication and
// authorization through the API server (no anonymous access; the API
// server's kubelet client certificate needs -client-ca-file). With -nodes
// N it is not served. See the module's README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/virtualkubelet/provider"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "syncpod-vk:", err)
		os.Exit(1)
	}
}

// options are the command's settings.
type options struct {
	nodeName, endpoint, podLogDir, nodeIP string
	podDir                                string
	// capacity holds what -cpu, -memory, -ephemeral-storage and -pods
	// give; the node advertises the host's figures for the others, unless
	// fixedCapacity (-nodes N, see nodeStatusConfig).
	capacity      corev1.ResourceList
	reserved      corev1.ResourceList // -system-reserved plus -kube-reserved
	fixedCapacity bool
	// kubeletPort is the kubelet API port the node advertises in its
	// daemon endpoints (0: 10250).
	kubeletPort int
	taint       bool
	workers     int
	api         apiOptions
}

func run() error {
	var (
		kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster to join")
		nodeName   = flag.String("nodename", "syncpod-vk", "name of the virtual node")
		endpoint   = flag.String("cri-endpoint", "", "CRI endpoint (unix:///run/containerd/containerd.sock); empty runs the simulated runtime in-process")
		podLogDir  = flag.String("pod-log-dir", "", "directory for pod logs (the kubelet uses /var/log/pods); empty: no logs")
		podDir     = flag.String("pod-dir", "", "directory for pod volumes (emptyDir, downwardAPI, configMap, secret, projected such as kube-api-access) and termination-message files, as the kubelet's /var/lib/kubelet/pods; empty: pods with such volumes fail to start")
		nodeIP     = flag.String("node-ip", "", "the node's InternalIP, reported as the pods' hostIP; empty: an address of the host's default-route interface")
		cpu        = flag.String("cpu", "", "CPU capacity advertised; empty: the host's CPUs (8 with -nodes N)")
		memory     = flag.String("memory", "", "memory capacity advertised; empty: the host's MemTotal (32Gi with -nodes N)")
		storage    = flag.String("ephemeral-storage", "", "ephemeral-storage capacity advertised; empty: the size of the -pod-dir filesystem (none with -nodes N)")
		maxPods    = flag.String("pods", "", "pod capacity advertised; empty: 110")
		sysRes     = flag.String("system-reserved", "", "resources kept for the system, taken out of allocatable: cpu=500m,memory=1Gi,ephemeral-storage=1Gi")
		kubeRes    = flag.String("kube-reserved", "", "resources kept for Kubernetes daemons, taken out of allocatable, as -system-reserved")
		taint      = flag.Bool("taint", true, "taint the node so only pods that tolerate it land here")
		workers    = flag.Int("workers", 4, "pod controller sync workers")
		debug      = flag.Bool("debug", false, "debug logging")
		apiQPS     = flag.Float64("kube-api-qps", 50, "API server requests per second (the kubelet's kubeAPIQPS default)")
		apiBurst   = flag.Int("kube-api-burst", 100, "API server request burst (the kubelet's kubeAPIBurst default)")
		nodes      = flag.Int("nodes", 1, "virtual nodes this process runs, each on its own simulated runtime and named <nodename>-00, -01...; more than 1 needs the simulated runtime")
		apiAddr    = flag.String("kubelet-api-address", "0.0.0.0:10250", "address of the node's kubelet API (logs, exec, attach, port-forward, stats; port 0: a free one); empty: not served")
		tlsCert    = flag.String("tls-cert-file", "", "kubelet API serving certificate (PEM); empty: a self-signed one")
		tlsKey     = flag.String("tls-private-key-file", "", "key of -tls-cert-file")
		clientCA   = flag.String("client-ca-file", "", "CA bundle that authenticates client certificates on the kubelet API (the API server's kubelet client certificate); empty: bearer tokens only")
	)
	flag.Parse()
	if *nodes < 1 {
		return fmt.Errorf("-nodes %d: must be at least 1", *nodes)
	}
	if *nodes > 1 && *endpoint != "" {
		// One runtime cannot tell the nodes' pods apart: each node would
		// take the others' sandboxes for its own orphans.
		return fmt.Errorf("-nodes %d with -cri-endpoint: several nodes need the simulated runtime, one each", *nodes)
	}
	o := options{nodeName: *nodeName, endpoint: *endpoint, podLogDir: *podLogDir, podDir: *podDir, nodeIP: *nodeIP,
		taint: *taint, workers: *workers, kubeletPort: defaultKubeletPort, fixedCapacity: *nodes > 1,
		api: apiOptions{listen: *apiAddr, certFile: *tlsCert, keyFile: *tlsKey, clientCAFile: *clientCA}}
	if (*tlsCert == "") != (*tlsKey == "") {
		return errors.New("-tls-cert-file and -tls-private-key-file go together")
	}
	var err error
	if o.capacity, o.reserved, err = parseCapacity(map[corev1.ResourceName]string{corev1.ResourceCPU: *cpu,
		corev1.ResourceMemory: *memory, corev1.ResourceEphemeralStorage: *storage, corev1.ResourcePods: *maxPods},
		*sysRes, *kubeRes, o.fixedCapacity); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logCfg := zap.NewProductionConfig()
	if *debug {
		logCfg.Level = zap.NewAtomicLevelAt(zap.DebugLevel)
	}
	logger, err := logCfg.Build()
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()

	// nodeutil would build the client itself, but panics later if it
	// cannot, and keeps client-go's 5 requests per second: a node with a
	// few dozen pods then waits seconds to publish their statuses.
	if *nodes == 1 {
		kube, err := kubeClientset(*kubeconfig, float32(*apiQPS), *apiBurst)
		if err != nil {
			return err
		}
		return runNode(ctx, kube, o, logger)
	}
	return runNodes(ctx, *nodes, o, logger, func() (kubernetes.Interface, error) {
		return kubeClientset(*kubeconfig, float32(*apiQPS), *apiBurst)
	})
}

// runNodes runs n virtual nodes named after o.nodeName until ctx ends or
// one of them fails, which stops the others. Each node has its own API
// client, so each gets the kubelet's request rate, as n kubelets would.
func runNodes(ctx context.Context, n int, o options, logger *zap.Logger, client func() (kubernetes.Interface, error)) error {
	kubes := make([]kubernetes.Interface, n)
	for i := range kubes {
		var err error
		if kubes[i], err = client(); err != nil {
			return err
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	for i, kube := range kubes {
		no := o
		no.nodeName = fmt.Sprintf("%s-%02d", o.nodeName, i)
		no.api.listen = "" // hollow nodes: one port each would be needed
		g.Go(func() error {
			if err := runNode(ctx, kube, no, logger.With(zap.String("node", no.nodeName))); err != nil {
				return fmt.Errorf("node %s: %w", no.nodeName, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// kubeClientset connects to the cluster of kubeconfig, or to the one it
// runs in when kubeconfig is empty, at qps requests per second.
func kubeClientset(kubeconfig string, qps float32, burst int) (kubernetes.Interface, error) {
	if qps <= 0 || burst <= 0 {
		return nil, fmt.Errorf("kube-api-qps %v and kube-api-burst %d must be positive", qps, burst)
	}
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client from %q (or in-cluster config): %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	return kubernetes.NewForConfig(cfg)
}

// runNode runs the virtual node until ctx ends.
func runNode(ctx context.Context, kube kubernetes.Interface, o options, logger *zap.Logger) error {
	cri := o.endpoint
	if cri == "" {
		srv, err := crisim.Start(
			crisim.WithRealisticLatencies(),
			crisim.WithVersion("crisim", "simulated"),
			crisim.WithRegistryImage("docker.io/library/busybox:1.36", 2<<20),
			crisim.WithRegistryImage("docker.io/library/nginx:1.27", 70<<20),
			crisim.WithRegistryImage("docker.io/library/nginx:latest", 70<<20),
			crisim.WithRegistryImage("docker.io/library/alpine:3.20", 4<<20),
			crisim.WithPullBandwidth(50<<20),
		)
		if err != nil {
			return fmt.Errorf("start simulated runtime: %w", err)
		}
		defer func() { _ = srv.Close() }()
		cri = srv.Endpoint()
		logger.Info("running the simulated CRI runtime", zap.String("endpoint", cri))
	}
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	client, err := criclient.Dial(dialCtx, cri, criclient.WithLogger(logger))
	cancel()
	if err != nil {
		return fmt.Errorf("dial %s: %w", cri, err)
	}
	defer func() { _ = client.Close() }()

	version, err := criVersion(client.CRI())(ctx)
	if err != nil {
		return fmt.Errorf("runtime version: %w", err)
	}
	host := readHostFacts(statusFSPath(o))
	if o.nodeIP == "" {
		o.nodeIP = host.DefaultIP // the kubelet's hostIP is its node's InternalIP
	}
	prov, err := provider.New(ctx, client.CRI(), client.CRI(),
		provider.WithLogger(logger), provider.WithNodeName(o.nodeName),
		provider.WithNodeIP(o.nodeIP), provider.WithPodLogDir(o.podLogDir), provider.WithPodDir(o.podDir),
		provider.WithKubeClient(kube))
	if err != nil {
		return err
	}
	defer func() { _ = prov.Close() }()

	var kapi *kubeletAPI
	if o.api.listen != "" {
		if kapi, err = listenKubeletAPI(o.api); err != nil {
			return err
		}
		defer kapi.stop()
		o.kubeletPort = int(kapi.port)
	}
	var pods corev1listers.PodLister
	status := newNodeStatus(nodeStatusConfig(o), clock.RealClock{}, logger, prov.Healthy, criVersion(client.CRI()),
		func() hostFacts { return readHostFacts(statusFSPath(o)) }, version, host)
	vk, err := nodeutil.NewNode(o.nodeName, func(cfg nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		n := cfg.Node
		if o.taint {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{
				Key: "virtual-kubelet.io/provider", Value: "syncpod", Effect: corev1.TaintEffectNoSchedule,
			})
		}
		status.register(n)
		pods = cfg.Pods
		return prov, status, nil
	}, func(cfg *nodeutil.NodeConfig) error {
		cfg.Client = kube
		cfg.NumWorkers = o.workers
		return nil
	})
	if err != nil {
		return err
	}
	if kapi != nil {
		if err := startKubeletAPI(kapi, o.api, kube, o.nodeName, o.nodeIP, prov, pods, logger); err != nil {
			return err
		}
	}
	logger.Info("starting virtual node", zap.String("node", o.nodeName))
	if err := vk.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
