package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	criapi "k8s.io/cri-api/pkg/apis"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/pleg"
	"github.com/syncpod/syncpod/statecache"
)

var (
	_ node.PodLifecycleHandler = (*Provider)(nil)
	_ node.PodNotifier         = (*Provider)(nil)
	_ node.NodeProvider        = (*Provider)(nil)
)

// ErrClosed is returned by every call made after Close.
var ErrClosed = errors.New("provider: closed")

// Provider is a virtual-kubelet provider that runs pods on a CRI runtime.
// Create it with New; it is safe for concurrent use; Close releases it.
type Provider struct {
	cfg         config
	rt          criapi.RuntimeService
	images      criapi.ImageManagerService
	runtimeName string

	runtimeCache *statecache.Cache[types.UID, *pleg.PodStatus]
	statuses     *statecache.Cache[string, *corev1.Pod]
	pleg         *pleg.PLEG
	pulls        *asyncpull.Scheduler
	notifier     *notifier

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // workers and the event dispatcher

	mu          sync.Mutex
	closed      bool
	workers     map[string]*podWorker    // namespace/name -> the pod's current worker
	byUID       map[types.UID]*podWorker // every worker, terminating ones included
	closeOnce   sync.Once
	dispatchEnd chan struct{}
}

// New returns a running Provider over a CRI runtime and image service
// (a criclient.Client is both). It asks the runtime for its name (the
// scheme of container IDs, "containerd://..."), starts the PLEG and the
// pull scheduler, and fails if the runtime does not answer.
func New(ctx context.Context, rt criapi.RuntimeService, images criapi.ImageManagerService, opts ...Option) (*Provider, error) {
	if rt == nil || images == nil {
		return nil, errdefs.InvalidInput("provider.New: nil runtime or image service")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.errorResync <= 0 || cfg.crashInitial <= 0 || cfg.crashMax < cfg.crashInitial || cfg.maxGrace < 0 || cfg.maxParallelStarts < 1 {
		return nil, errdefs.InvalidInput("provider.New: invalid option: resync and back-offs must be positive, max back-off at least the initial one, max parallel starts at least 1")
	}
	if cfg.nodeName != "" {
		cfg.logger = cfg.logger.With(zap.String("node", cfg.nodeName))
	}
	v, err := rt.Version(ctx, "v1")
	if err != nil {
		return nil, fmt.Errorf("provider.New: runtime version: %w", err)
	}
	p := &Provider{
		cfg:          cfg,
		rt:           rt,
		images:       images,
		runtimeName:  v.GetRuntimeName(),
		runtimeCache: statecache.New[types.UID, *pleg.PodStatus](),
		statuses:     statecache.New[string, *corev1.Pod](),
		workers:      map[string]*podWorker{},
		byUID:        map[types.UID]*podWorker{},
		dispatchEnd:  make(chan struct{}),
	}
	if p.runtimeName == "" {
		p.runtimeName = "cri"
	}
	p.pleg, err = pleg.New(rt, p.runtimeCache, append([]pleg.Option{pleg.WithLogger(cfg.logger)}, cfg.plegOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("provider.New: %w", err)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if err := p.pleg.Start(p.ctx); err != nil {
		p.cancel()
		_ = p.pleg.Close()
		return nil, fmt.Errorf("provider.New: start PLEG: %w", err)
	}
	// No WithNotify: workers wait for pulls (Wait) inside their start
	// plan and set their own timers for back-offs, so that a failed pull
	// shows ErrImagePull until the next sync, as with the kubelet, instead
	// of being replaced at once by ImagePullBackOff.
	pulls, err := asyncpull.New(images, append([]asyncpull.Option{asyncpull.WithLogger(cfg.logger)}, cfg.pullOpts...)...)
	if err != nil {
		p.cancel()
		_ = p.pleg.Close()
		return nil, fmt.Errorf("provider.New: %w", err)
	}
	p.pulls = pulls
	p.notifier = newNotifier()
	go p.dispatch()
	return p, nil
}

// Close stops every pod worker, the PLEG and the pull scheduler, and waits
// for them. Pods keep running in the runtime (like a kubelet restart).
// It is idempotent.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cancel()
		p.wg.Wait() // workers see p.ctx done
		p.pulls.Close()
		_ = p.pleg.Close() // closes Watch: the dispatcher ends
		<-p.dispatchEnd
		p.notifier.close()
	})
	return nil
}

// Healthy reports whether the runtime answers (the PLEG's health). Use it
// as the node's Ping.
func (p *Provider) Healthy() error {
	_, err := p.pleg.Healthy()
	return err
}

// Ping implements virtual-kubelet's node.NodeProvider heartbeat: it fails
// while the PLEG is unhealthy.
func (p *Provider) Ping(context.Context) error { return p.Healthy() }

// NotifyNodeStatus implements node.NodeProvider; the node status does not
// change on its own here.
func (p *Provider) NotifyNodeStatus(context.Context, func(*corev1.Node)) {}

func podKey(namespace, name string) string { return namespace + "/" + name }

// CreatePod accepts a pod and returns at once: its sandbox, image pulls and
// containers are handled by a background worker, whose progress is reported
// through NotifyPods.
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	if err := validatePod(pod); err != nil {
		return err
	}
	pod = pod.DeepCopy()
	key := podKey(pod.Namespace, pod.Name)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if w, ok := p.workers[key]; ok {
		p.mu.Unlock()
		if w.uid == pod.UID {
			return nil // already running: virtual-kubelet retries a create it timed out on
		}
		return errdefs.InvalidInputf("CreatePod %s: a pod with this name (uid %s) is still known; delete it first", key, w.uid)
	}
	if _, ok := p.byUID[pod.UID]; ok {
		p.mu.Unlock()
		return errdefs.InvalidInputf("CreatePod %s: uid %s belongs to a pod being deleted", key, pod.UID)
	}
	w := newPodWorker(p, pod)
	p.workers[key] = w
	p.byUID[pod.UID] = w
	p.wg.Add(1)
	p.mu.Unlock()
	// An initial status, so GetPod answers and kubectl shows Pending at once.
	p.publish(w)
	go w.run(p.ctx)
	return nil
}

// UpdatePod hands a changed spec to the pod's worker and returns at once.
// Containers whose spec changed (their image, say) are restarted.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	if err := validatePod(pod); err != nil {
		return err
	}
	p.mu.Lock()
	w, ok := p.workers[podKey(pod.Namespace, pod.Name)]
	p.mu.Unlock()
	if !ok || w.uid != pod.UID {
		return errdefs.NotFoundf("UpdatePod %s/%s: pod uid %s is not known to the provider", pod.Namespace, pod.Name, pod.UID)
	}
	w.update(pod.DeepCopy())
	return nil
}

// DeletePod starts stopping the pod and returns at once. The pod is no
// longer known to GetPod, GetPodStatus and GetPods; once its containers and
// sandbox are stopped and removed its terminal status (Succeeded or
// Failed, every container terminated) is delivered through NotifyPods.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	if pod == nil || pod.Namespace == "" || pod.Name == "" {
		return errdefs.InvalidInput("DeletePod: pod must have a namespace and a name")
	}
	key := podKey(pod.Namespace, pod.Name)
	p.mu.Lock()
	w, ok := p.workers[key]
	if !ok || (pod.UID != "" && w.uid != pod.UID) {
		p.mu.Unlock()
		return errdefs.NotFoundf("DeletePod %s: pod is not known to the provider", key)
	}
	delete(p.workers, key)
	// Under p.mu, with the worker's removal: a publish of this worker
	// either stored its status before (and it is deleted here) or sees it
	// is no longer current (and stores nothing), and a pod created with
	// the same name afterwards keeps its own status.
	p.statuses.Delete(key)
	p.mu.Unlock()
	w.delete(pod.DeepCopy())
	return nil
}

// GetPod returns a copy of the pod with its latest status, from the status
// cache.
func (p *Provider) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	key := podKey(namespace, name)
	p.mu.Lock()
	_, ok := p.workers[key]
	p.mu.Unlock()
	pod, _ := p.statuses.Get(key)
	if !ok || pod == nil {
		return nil, errdefs.NotFoundf("pod %s is not known to the provider", key)
	}
	return pod.DeepCopy(), nil
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
	keys := make([]string, 0, len(p.workers))
	for k := range p.workers {
		keys = append(keys, k)
	}
	p.mu.Unlock()
	sort.Strings(keys)
	pods := make([]*corev1.Pod, 0, len(keys))
	for _, k := range keys {
		if pod, _ := p.statuses.Get(k); pod != nil {
			pods = append(pods, pod.DeepCopy())
		}
	}
	return pods, nil
}

// NotifyPods registers the callback virtual-kubelet's PodController is told
// of status changes with. It is called from one provider goroutine, never
// under a provider lock, with the latest status of each changed pod
// (changes coalesce: a slow callback delays, never loses, an update). It
// stops being called when ctx ends or the provider is closed.
func (p *Provider) NotifyPods(ctx context.Context, cb func(*corev1.Pod)) {
	p.notifier.setCallback(ctx, cb)
}

// dispatch turns PLEG events into status publications and worker wake-ups.
func (p *Provider) dispatch() {
	defer close(p.dispatchEnd)
	for ev := range p.pleg.Watch() {
		p.mu.Lock()
		w := p.byUID[ev.ID]
		p.mu.Unlock()
		if w == nil {
			continue
		}
		p.cfg.logger.Debug("pod lifecycle event", zap.String("pod", w.key), zap.String("type", string(ev.Type)), zap.String("id", ev.Data))
		p.publish(w)
		w.wake()
	}
}

// forget drops a worker that has finished terminating.
func (p *Provider) forget(w *podWorker) {
	p.mu.Lock()
	if p.byUID[w.uid] == w {
		delete(p.byUID, w.uid)
	}
	p.mu.Unlock()
}

// publish recomputes the pod's status, stores it in the status cache and
// queues it for NotifyPods if it changed.
func (p *Provider) publish(w *podWorker) {
	w.pubMu.Lock()
	defer w.pubMu.Unlock()
	p.publishPubLocked(w)
}

func (p *Provider) publishPubLocked(w *podWorker) {
	pod, terminal := w.status()
	if pod == nil {
		return
	}
	if !terminal {
		now := p.cfg.clock.Now()
		// The check and the Set are one step under p.mu, as DeletePod's
		// removal and Delete are: a status is never stored for a worker
		// DeletePod has already removed. statuses has no subscribers, so
		// Set calls nothing back under the lock.
		p.mu.Lock()
		if p.workers[w.key] == w {
			p.statuses.Set(w.key, pod, nil, now)
		}
		p.mu.Unlock()
	}
	if w.changed(pod) {
		p.notifier.enqueue(string(w.uid), pod)
	}
}

// gracePeriod is how long containers of pod get to stop.
func (p *Provider) gracePeriod(pod *corev1.Pod) time.Duration {
	d := DefaultGracePeriod
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		d = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		d = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	if d > p.cfg.maxGrace {
		d = p.cfg.maxGrace
	}
	if d < 0 {
		d = 0
	}
	return d
}
