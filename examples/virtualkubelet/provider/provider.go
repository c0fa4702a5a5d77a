package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	criapi "k8s.io/cri-api/pkg/apis"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

var (
	_ node.PodLifecycleHandler = (*Provider)(nil)
	_ node.PodNotifier         = (*Provider)(nil)
	_ node.NodeProvider        = (*Provider)(nil)
)

// ErrClosed is returned by every call made after Close.
var ErrClosed = errors.New("provider: closed")

// Provider is a virtual-kubelet provider that runs pods on a CRI runtime
// through the syncpod agent. Create it with New; it is safe for
// concurrent use; Close releases it.
type Provider struct {
	cfg       config
	rt        criapi.RuntimeService // the kubelet API's calls: logs, streaming, stats
	agent     *agent.Agent
	notifier  *notifier
	nodeCPU   nodeCPU    // the node's last CPU sample (GetStatsSummary)
	resources *Resources // nil without WithKubeClient

	mu        sync.Mutex
	closed    bool
	pods      map[string]*podEntry    // namespace/name -> the pod's current entry
	byUID     map[types.UID]*podEntry // every pod until its terminal status, deleted ones included
	closeOnce sync.Once
}

// podEntry is one pod as virtual-kubelet gave it.
type podEntry struct {
	key      string
	uid      types.UID
	pod      *corev1.Pod // as given, to restore what the agent's copy changed
	deleting bool
}

// New returns a running Provider over a CRI runtime and image service
// (a criclient.Client is both). It asks the runtime for its version
// (failing if the runtime does not answer) and starts the agent that runs
// the pods: its PLEG, pull scheduler and start admission.
func New(ctx context.Context, rt criapi.RuntimeService, images criapi.ImageManagerService, opts ...Option) (*Provider, error) {
	if rt == nil || images == nil {
		return nil, errdefs.InvalidInput("provider.New: nil runtime or image service")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.clock == nil || cfg.logger == nil || cfg.crashInitial <= 0 || cfg.crashMax < cfg.crashInitial || cfg.maxGrace < 0 || cfg.maxParallelStarts < 1 {
		return nil, errdefs.InvalidInput("provider.New: invalid option: a clock and a logger are required, back-offs must be positive, max back-off at least the initial one, max parallel starts at least 1")
	}
	if cfg.nodeName != "" {
		cfg.logger = cfg.logger.With(zap.String("node", cfg.nodeName))
	}
	if _, err := rt.Version(ctx, "v1"); err != nil {
		return nil, fmt.Errorf("provider.New: runtime version: %w", err)
	}
	p := &Provider{cfg: cfg, rt: rt, notifier: newNotifier(), pods: map[string]*podEntry{}, byUID: map[types.UID]*podEntry{}}
	agentOpts := []agent.Option{
		agent.WithClock(cfg.clock),
		agent.WithLogger(cfg.logger),
		agent.WithNode(agent.Node{IP: cfg.nodeIP, PodNetwork: true, PodLogDir: cfg.podLogDir, PodDir: cfg.podDir,
			MaxGracePeriod: cfg.maxGrace}),
		agent.WithTuning(agent.Tuning{CrashBackOffInitial: cfg.crashInitial, CrashBackOffMax: cfg.crashMax,
			StartParallelism: cfg.maxParallelStarts, PullOptions: cfg.pullOpts}),
		agent.WithPodStatusHook(p.onStatus),
	}
	if cfg.kube != nil {
		res, err := NewResources(cfg.kube, cfg.logger)
		if err != nil {
			p.notifier.close()
			return nil, fmt.Errorf("provider.New: %w", err)
		}
		p.resources = res
		agentOpts = append(agentOpts, agent.WithNode(agent.Node{Resources: res}))
	}
	closeResources := func() {
		if p.resources != nil {
			_ = p.resources.Close()
		}
	}
	a, err := agent.New(rt, images, append(agentOpts, cfg.agentOpts...)...)
	if err != nil {
		p.notifier.close()
		closeResources()
		return nil, fmt.Errorf("provider.New: %w", err)
	}
	if err := a.Start(); err != nil {
		a.Stop()
		p.notifier.close()
		closeResources()
		return nil, fmt.Errorf("provider.New: %w", err)
	}
	p.agent = a
	return p, nil
}

// Close stops the agent (every pod worker, the PLEG and the pull
// scheduler), the notifications and the watches of WithKubeClient, and
// waits for them. Pods keep running
// in the runtime (like a kubelet restart): a provider started later adopts
// them as virtual-kubelet creates them again. It is idempotent.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.agent.Stop()
		p.notifier.close()
		if p.resources != nil {
			_ = p.resources.Close()
		}
	})
	return nil
}

// Healthy reports whether the node can run pods: the agent's Healthy,
// which names the runtime when it does not answer and the PLEG otherwise.
// Use it for the node's Ready condition (syncpod-vk's node status does).
func (p *Provider) Healthy() error { return p.agent.Healthy() }

// Ping implements virtual-kubelet's node.NodeProvider heartbeat: it fails
// only when ctx has ended. It does not fail for an unhealthy runtime:
// virtual-kubelet neither renews the node's Lease nor updates its status
// while Ping fails, so the Node would turn Unknown instead of Ready=False
// with the runtime named. The kubelet, too, keeps its Lease while its
// runtime is down.
func (p *Provider) Ping(ctx context.Context) error { return ctx.Err() }

// NotifyNodeStatus implements node.NodeProvider; the Provider pushes no
// status of its own (syncpod-vk builds the node's status from Healthy and
// the host, and pushes every change).
func (p *Provider) NotifyNodeStatus(context.Context, func(*corev1.Node)) {}

func podKey(namespace, name string) string { return namespace + "/" + name }

// CreatePod accepts a pod and returns at once: the agent's worker for the
// pod creates its sandbox, pulls its images and starts its containers,
// and its progress is reported through NotifyPods.
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	if err := validatePod(pod); err != nil {
		return err
	}
	key := podKey(pod.Namespace, pod.Name)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if e, ok := p.pods[key]; ok {
		p.mu.Unlock()
		if e.uid == pod.UID {
			return nil // already running: virtual-kubelet retries a create it timed out on
		}
		return errdefs.InvalidInputf("CreatePod %s: a pod with this name (uid %s) is still known; delete it first", key, e.uid)
	}
	if _, ok := p.byUID[pod.UID]; ok {
		p.mu.Unlock()
		return errdefs.InvalidInputf("CreatePod %s: uid %s belongs to a pod being deleted", key, pod.UID)
	}
	e := &podEntry{key: key, uid: pod.UID, pod: pod.DeepCopy()}
	p.pods[key] = e
	p.byUID[pod.UID] = e
	p.mu.Unlock()
	p.agent.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: agentPod(pod), Source: "api"})
	return nil
}

// UpdatePod hands a changed spec to the pod's worker and returns at once.
// Containers whose spec changed (their image, say) are restarted.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	if err := validatePod(pod); err != nil {
		return err
	}
	p.mu.Lock()
	e, ok := p.pods[podKey(pod.Namespace, pod.Name)]
	if ok && e.uid == pod.UID {
		e.pod = pod.DeepCopy()
	}
	p.mu.Unlock()
	if !ok || e.uid != pod.UID {
		return errdefs.NotFoundf("UpdatePod %s/%s: pod uid %s is not known to the provider", pod.Namespace, pod.Name, pod.UID)
	}
	p.agent.Apply(agent.PodUpdate{Op: agent.OpUpdate, Pod: agentPod(pod), Source: "api"})
	return nil
}

// DeletePod starts stopping the pod and returns at once. The pod is no
// longer known to GetPod, GetPodStatus and GetPods; once its containers
// are stopped (with its grace period, or its deletion's) its terminal
// status (Succeeded or Failed, every container terminated) is delivered
// through NotifyPods, and its sandbox is removed.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	if pod == nil || pod.Namespace == "" || pod.Name == "" {
		return errdefs.InvalidInput("DeletePod: pod must have a namespace and a name")
	}
	key := podKey(pod.Namespace, pod.Name)
	p.mu.Lock()
	e, ok := p.pods[key]
	if !ok || (pod.UID != "" && e.uid != pod.UID) {
		p.mu.Unlock()
		return errdefs.NotFoundf("DeletePod %s: pod is not known to the provider", key)
	}
	delete(p.pods, key)
	e.deleting = true
	p.mu.Unlock()
	deleted := pod.DeepCopy()
	deleted.UID = e.uid
	p.agent.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: deleted, UID: e.uid, Source: "api"})
	return nil
}

// GetPod returns a copy of the pod with its latest status. It reads the
// agent's state, never the runtime.
func (p *Provider) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	key := podKey(namespace, name)
	p.mu.Lock()
	e, ok := p.pods[key]
	p.mu.Unlock()
	if !ok {
		return nil, errdefs.NotFoundf("pod %s is not known to the provider", key)
	}
	pod, err := p.agent.Pod(e.uid)
	if err != nil {
		return nil, errdefs.NotFoundf("pod %s: %v", key, err)
	}
	return p.restore(e, pod), nil
}

// GetPodStatus returns a copy of the pod's latest status.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns copies of every pod the provider runs, sorted by
// namespace/name.
func (p *Provider) GetPods(ctx context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	entries := make([]*podEntry, 0, len(p.pods))
	for _, e := range p.pods {
		entries = append(entries, e)
	}
	p.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
	pods := make([]*corev1.Pod, 0, len(entries))
	for _, e := range entries {
		if pod, err := p.agent.Pod(e.uid); err == nil {
			pods = append(pods, p.restore(e, pod))
		}
	}
	return pods, nil
}

// NotifyPods registers the callback virtual-kubelet's PodController is told
// of status changes with. It is called from one provider goroutine, never
// under a provider or agent lock, with the latest status of each changed
// pod (changes coalesce: a slow callback delays, never loses, an update).
// It stops being called when ctx ends or the provider is closed.
func (p *Provider) NotifyPods(ctx context.Context, cb func(*corev1.Pod)) {
	p.notifier.setCallback(ctx, cb)
}

// onStatus takes the agent's status updates: a deleted pod's only as its
// terminal one, after which the pod is forgotten.
func (p *Provider) onStatus(u agent.PodStatusUpdate) {
	p.mu.Lock()
	e := p.byUID[u.Pod.UID]
	if e == nil || (e.deleting && !u.Final) {
		p.mu.Unlock()
		return
	}
	if u.Final {
		delete(p.byUID, e.uid)
	}
	p.mu.Unlock()
	p.notifier.enqueue(string(e.uid), p.restore(e, u.Pod))
}

// restore is the pod as virtual-kubelet gave it (the agent's copy carries
// the container annotations it was handed) with the agent's status and the
// deletion fields the agent set.
func (p *Provider) restore(e *podEntry, pod *corev1.Pod) *corev1.Pod {
	p.mu.Lock()
	orig := e.pod
	p.mu.Unlock()
	out := orig.DeepCopy()
	out.Status = pod.Status
	if pod.DeletionTimestamp != nil {
		out.DeletionTimestamp, out.DeletionGracePeriodSeconds = pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds
	}
	return out
}
