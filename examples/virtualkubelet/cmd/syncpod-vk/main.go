// Command syncpod-vk runs a virtual node whose pods run on a CRI runtime
// through syncpod's building blocks: by default an in-process simulated
// runtime (crisim), or a real one (containerd, CRI-O) with -cri-endpoint.
//
//	syncpod-vk -kubeconfig ~/.kube/config -nodename syncpod-vk
//	syncpod-vk -kubeconfig ~/.kube/config -cri-endpoint unix:///run/containerd/containerd.sock -pod-log-dir /var/log/pods
//
// The node registers itself (with the taint virtual-kubelet.io/provider=syncpod:NoSchedule
// unless -taint=false), watches the pods scheduled to it and reports their
// statuses. With -nodes N one process runs N such nodes, each on its own
// simulated runtime, to load a control plane as kubemark's hollow nodes
// do. Logs, exec, attach and port-forward are not served. See the
// module's README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

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
	capacity                              corev1.ResourceList
	taint                                 bool
	workers                               int
}

func run() error {
	var (
		kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster to join")
		nodeName   = flag.String("nodename", "syncpod-vk", "name of the virtual node")
		endpoint   = flag.String("cri-endpoint", "", "CRI endpoint (unix:///run/containerd/containerd.sock); empty runs the simulated runtime in-process")
		podLogDir  = flag.String("pod-log-dir", "", "directory for pod logs (the kubelet uses /var/log/pods); empty: no logs")
		podDir     = flag.String("pod-dir", "", "directory for pod volumes (emptyDir, downwardAPI, configMap, secret, projected such as kube-api-access) and termination-message files, as the kubelet's /var/lib/kubelet/pods; empty: pods with such volumes fail to start")
		nodeIP     = flag.String("node-ip", "", "IP reported as the pods' hostIP")
		cpu        = flag.String("cpu", "8", "CPU capacity advertised")
		memory     = flag.String("memory", "32Gi", "memory capacity advertised")
		maxPods    = flag.String("pods", "110", "pod capacity advertised")
		taint      = flag.Bool("taint", true, "taint the node so only pods that tolerate it land here")
		workers    = flag.Int("workers", 4, "pod controller sync workers")
		debug      = flag.Bool("debug", false, "debug logging")
		apiQPS     = flag.Float64("kube-api-qps", 50, "API server requests per second (the kubelet's kubeAPIQPS default)")
		apiBurst   = flag.Int("kube-api-burst", 100, "API server request burst (the kubelet's kubeAPIBurst default)")
		nodes      = flag.Int("nodes", 1, "virtual nodes this process runs, each on its own simulated runtime and named <nodename>-00, -01...; more than 1 needs the simulated runtime")
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
		taint: *taint, workers: *workers, capacity: corev1.ResourceList{}}
	for name, q := range map[corev1.ResourceName]string{corev1.ResourceCPU: *cpu, corev1.ResourceMemory: *memory, corev1.ResourcePods: *maxPods} {
		v, err := resource.ParseQuantity(q)
		if err != nil {
			return fmt.Errorf("capacity %s: %w", name, err)
		}
		o.capacity[name] = v
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

	prov, err := provider.New(ctx, client.CRI(), client.CRI(),
		provider.WithLogger(logger), provider.WithNodeName(o.nodeName),
		provider.WithNodeIP(o.nodeIP), provider.WithPodLogDir(o.podLogDir), provider.WithPodDir(o.podDir),
		provider.WithKubeClient(kube))
	if err != nil {
		return err
	}
	defer func() { _ = prov.Close() }()

	vk, err := nodeutil.NewNode(o.nodeName, func(cfg nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		n := cfg.Node
		n.Status.Capacity, n.Status.Allocatable = o.capacity, o.capacity
		n.Status.NodeInfo.OperatingSystem, n.Status.NodeInfo.Architecture = "linux", "amd64"
		n.Status.NodeInfo.KubeletVersion = "syncpod-vk"
		if o.nodeIP != "" {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: o.nodeIP}}
		}
		if o.taint {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{
				Key: "virtual-kubelet.io/provider", Value: "syncpod", Effect: corev1.TaintEffectNoSchedule,
			})
		}
		setConditions(n, nil)
		return unsupported{prov}, &nodeHealth{prov: prov, node: n.DeepCopy()}, nil
	}, func(cfg *nodeutil.NodeConfig) error {
		cfg.Client = kube
		cfg.NumWorkers = o.workers
		return nil
	})
	if err != nil {
		return err
	}
	logger.Info("starting virtual node", zap.String("node", o.nodeName))
	if err := vk.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// nodeHealth is the node's heartbeat and Ready condition: Ready while the
// runtime answers (the PLEG is healthy).
type nodeHealth struct {
	prov *provider.Provider
	node *corev1.Node
}

var _ node.NodeProvider = (*nodeHealth)(nil)

// Ping fails while the runtime does not answer, so the node's lease is
// not renewed and the cluster marks it NotReady.
func (h *nodeHealth) Ping(ctx context.Context) error { return h.prov.Ping(ctx) }

// NotifyNodeStatus reports Ready changes, checking the runtime's health
// every 10 seconds until ctx ends.
func (h *nodeHealth) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		var last error = errors.New("unknown")
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := h.prov.Healthy()
			if (err == nil) == (last == nil) {
				continue
			}
			last = err
			n := h.node.DeepCopy()
			setConditions(n, err)
			cb(n)
		}
	}()
}

// setConditions sets the node's conditions: Ready unless unhealthy is set,
// no pressure of any kind.
func setConditions(n *corev1.Node, unhealthy error) {
	now := metav1.Now()
	n.Status.Phase = corev1.NodeRunning
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "the CRI runtime answers", LastHeartbeatTime: now, LastTransitionTime: now}
	if unhealthy != nil {
		ready.Status, ready.Reason, ready.Message = corev1.ConditionFalse, "KubeletNotReady", unhealthy.Error()
	}
	n.Status.Conditions = []corev1.NodeCondition{ready}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse,
			Reason: "KubeletHasNo" + string(t), LastHeartbeatTime: now, LastTransitionTime: now})
	}
}

// errUnsupported answers the node API calls this example does not serve.
var errUnsupported = errors.New("not supported by the syncpod example provider")

// unsupported completes the provider into a nodeutil.Provider.
type unsupported struct{ *provider.Provider }

var _ nodeutil.Provider = unsupported{}

func (unsupported) GetContainerLogs(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
	return nil, errUnsupported
}

func (unsupported) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return errUnsupported
}

func (unsupported) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errUnsupported
}

func (unsupported) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return nil, errUnsupported
}

func (unsupported) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, errUnsupported
}

func (unsupported) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errUnsupported
}
