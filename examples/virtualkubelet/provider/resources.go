package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

// Resources is the agent's source of pod resources (agent.PodResources)
// over the API server, as the kubelet's watch-based configMap and secret
// managers are: each configMap or secret that a registered pod
// references (volumes, projected sources, env, envFrom, imagePullSecrets)
// has one watch of its own (a list and watch by metadata.name), started
// when the first pod referencing it registers and stopped when the last
// one goes; reads come from the watch's cache once it has synced; a
// change wakes every pod referencing the object. Tokens are a
// TokenRequest each (the agent caches and rotates them). Use
// NewResources; Close stops every watch.
type Resources struct {
	kube kubernetes.Interface
	log  *zap.Logger

	mu      sync.Mutex
	closed  bool
	pods    map[types.UID]*podRefs
	watches map[objectKey]*objectWatch
	wg      sync.WaitGroup
}

var _ agent.PodResources = (*Resources)(nil)

// objectKey names one watched object.
type objectKey struct {
	kind            string // "configmaps" or "secrets"
	namespace, name string
}

func (k objectKey) String() string { return k.kind + "/" + k.namespace + "/" + k.name }

// podRefs is what one registered pod references.
type podRefs struct {
	refs    map[objectKey]bool
	changed func(types.UID)
}

// objectWatch is the watch of one object and the pods that reference it.
type objectWatch struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	pods     map[types.UID]bool
}

// ErrResourcesClosed is returned by the reads of a closed Resources.
var ErrResourcesClosed = errors.New("provider: resources closed")

// NewResources returns a Resources over kube. A nil kube is an error.
func NewResources(kube kubernetes.Interface, log *zap.Logger) (*Resources, error) {
	if kube == nil {
		return nil, errors.New("provider.NewResources: nil client")
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Resources{kube: kube, log: log, pods: map[types.UID]*podRefs{}, watches: map[objectKey]*objectWatch{}}, nil
}

// podReferences lists the configMaps and secrets pod references.
func podReferences(pod *corev1.Pod) map[objectKey]bool {
	refs := map[objectKey]bool{}
	cm := func(name string) {
		if name != "" {
			refs[objectKey{"configmaps", pod.Namespace, name}] = true
		}
	}
	secret := func(name string) {
		if name != "" {
			refs[objectKey{"secrets", pod.Namespace, name}] = true
		}
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			cm(v.ConfigMap.Name)
		case v.Secret != nil:
			secret(v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					cm(s.ConfigMap.Name)
				}
				if s.Secret != nil {
					secret(s.Secret.Name)
				}
			}
		}
	}
	var containers []corev1.Container
	containers = append(containers, pod.Spec.InitContainers...)
	containers = append(containers, pod.Spec.Containers...)
	for _, c := range containers {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				cm(e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				secret(e.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				cm(r.Name)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				secret(r.Name)
			}
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		secret(s.Name)
	}
	return refs
}

// RegisterPod implements agent.PodResources: the objects pod references
// are watched (a watch starts for each one not watched yet), those it no
// longer references are not watched for it.
func (r *Resources) RegisterPod(pod *corev1.Pod, changed func(types.UID)) {
	refs := podReferences(pod)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	old := r.pods[pod.UID]
	r.pods[pod.UID] = &podRefs{refs: refs, changed: changed}
	for k := range refs {
		w := r.watches[k]
		if w == nil {
			w = r.startWatchLocked(k)
		}
		w.pods[pod.UID] = true
	}
	if old != nil {
		for k := range old.refs {
			if !refs[k] {
				r.dropLocked(k, pod.UID)
			}
		}
	}
}

// UnregisterPod implements agent.PodResources: the watches only the pod
// of uid needed stop.
func (r *Resources) UnregisterPod(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.pods[uid]
	if old == nil {
		return
	}
	delete(r.pods, uid)
	for k := range old.refs {
		r.dropLocked(k, uid)
	}
}

func (r *Resources) dropLocked(k objectKey, uid types.UID) {
	w := r.watches[k]
	if w == nil {
		return
	}
	delete(w.pods, uid)
	if len(w.pods) == 0 {
		w.cancel()
		delete(r.watches, k)
	}
}

// Watched is the number of objects watched now.
func (r *Resources) Watched() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.watches)
}

// startWatchLocked starts the watch of k: a list and watch of its
// namespace by metadata.name.
func (r *Resources) startWatchLocked(k objectKey) *objectWatch {
	sel := fields.OneTermEqualSelector("metadata.name", k.name).String()
	var (
		lw      *cache.ListWatch
		example runtime.Object
	)
	switch k.kind {
	case "configmaps":
		c := r.kube.CoreV1().ConfigMaps(k.namespace)
		example, lw = &corev1.ConfigMap{}, listWatchSelected(sel, c.List, c.Watch)
	default:
		c := r.kube.CoreV1().Secrets(k.namespace)
		example, lw = &corev1.Secret{}, listWatchSelected(sel, c.List, c.Watch)
	}
	// The client says whether it streams the initial list (a fake one
	// does not).
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, r.kube), example, cache.SharedIndexInformerOptions{ObjectDescription: k.String()})
	ctx, cancel := context.WithCancel(context.Background())
	w := &objectWatch{informer: inf, cancel: cancel, pods: map[types.UID]bool{}}
	onChange := func(obj any) {
		if m, err := meta(obj); err != nil || m.GetName() != k.name {
			return
		}
		r.wake(k)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial { // the first list: no pod has read the object yet
				onChange(obj)
			}
		},
		UpdateFunc: func(_, obj any) { onChange(obj) },
		DeleteFunc: onChange,
	})
	r.watches[k] = w
	r.wg.Go(func() { inf.RunWithContext(ctx) })
	return w
}

func meta(obj any) (metav1.Object, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("not an object: %T", obj)
	}
	return m, nil
}

// wake calls changed for every pod that references k, outside the lock.
func (r *Resources) wake(k objectKey) {
	r.mu.Lock()
	w := r.watches[k]
	var wakes []func()
	if w != nil {
		for uid := range w.pods {
			if p := r.pods[uid]; p != nil && p.changed != nil {
				wakes = append(wakes, func() { p.changed(uid) })
			}
		}
	}
	r.mu.Unlock()
	r.log.Debug("watched object changed", zap.String("object", k.String()), zap.Int("pods", len(wakes)))
	for _, f := range wakes {
		f()
	}
}

// get is the object k from its watch's cache once synced (waiting within
// ctx), or, when no registered pod references it, straight from the API.
func (r *Resources) get(ctx context.Context, k objectKey) (any, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrResourcesClosed
	}
	w := r.watches[k]
	r.mu.Unlock()
	if w == nil {
		if k.kind == "configmaps" {
			return r.kube.CoreV1().ConfigMaps(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
		}
		return r.kube.CoreV1().Secrets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	}
	if !cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
		return nil, fmt.Errorf("%s: the watch has not synced: %w", k, context.Cause(ctx))
	}
	obj, ok, err := w.informer.GetStore().GetByKey(k.namespace + "/" + k.name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	if !ok {
		gr := corev1.Resource(k.kind)
		return nil, apierrors.NewNotFound(gr, k.name)
	}
	return obj, nil
}

// listWatchSelected lists and watches with the field selector sel.
func listWatchSelected[L runtime.Object](sel string, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return watchFn(ctx, o)
		},
	}
}

// getAs is get for an object of type T.
func getAs[T any](ctx context.Context, r *Resources, k objectKey) (T, error) {
	var zero T
	obj, err := r.get(ctx, k)
	if err != nil {
		return zero, err
	}
	v, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("%s %s/%s: got %T", k.kind, k.namespace, k.name, obj)
	}
	return v, nil
}

// ConfigMap implements agent.PodResources.
func (r *Resources) ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return getAs[*corev1.ConfigMap](ctx, r, objectKey{"configmaps", namespace, name})
}

// Secret implements agent.PodResources.
func (r *Resources) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return getAs[*corev1.Secret](ctx, r, objectKey{"secrets", namespace, name})
}

// ServiceAccountToken implements agent.PodResources with a TokenRequest
// (the serviceaccounts/token subresource).
func (r *Resources) ServiceAccountToken(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, ErrResourcesClosed
	}
	return r.kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
}

// Close stops every watch and waits for them; later reads return
// ErrResourcesClosed. It is idempotent.
func (r *Resources) Close() error {
	r.mu.Lock()
	r.closed = true
	for k, w := range r.watches {
		w.cancel()
		delete(r.watches, k)
	}
	r.pods = map[types.UID]*podRefs{}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}
