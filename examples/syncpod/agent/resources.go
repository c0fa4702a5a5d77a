package agent

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// PodResources gives the agent the API objects its pods reference:
// the configMaps and secrets of their configMap, secret and projected
// volumes, of their env (valueFrom, envFrom) and of their
// imagePullSecrets, and service-account tokens (TokenRequest). Set it
// with WithNode (Node.Resources); without one, a pod that references such an
// object fails to start its containers with a reason that says the API
// server is needed (static pods need none).
//
// The agent calls RegisterPod at each sync of a pod, before it reads
// what the pod references, and UnregisterPod when it forgets the pod; a
// source that watches objects (as the kubelet's watch-based managers do)
// watches what registered pods reference and calls changed with the
// UID of each registered pod that references an object that changed, so
// that its volumes are rewritten. Methods are called from the pods'
// workers, concurrently, and may block (bounded by ctx).
type PodResources interface {
	// RegisterPod records what pod references (again at each of its
	// syncs, so a changed pod changes what is watched).
	RegisterPod(pod *corev1.Pod, changed func(types.UID))
	// UnregisterPod forgets the pod of uid.
	UnregisterPod(uid types.UID)
	// ConfigMap is the configMap namespace/name; a missing one is an
	// error for which apierrors.IsNotFound is true.
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	// Secret is the secret namespace/name; a missing one is an error for
	// which apierrors.IsNotFound is true.
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	// ServiceAccountToken makes req for the service account
	// namespace/name (the API's TokenRequest) and returns the answer,
	// whose Status holds the token and its expiry.
	ServiceAccountToken(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// errNoResources is the reason a pod that needs the API server fails
// without a PodResources.
func errNoResources(what string) error {
	return fmt.Errorf("%s need the API server: not available to a static pod", what)
}

// resourceTimeout bounds one read of a pod's resources from the source.
const resourceTimeout = 30 * time.Second

// Token rotation, the kubelet's token manager's rule: a token is asked
// for again once 80% of its life has passed, or when it is older than a
// day, and an old one is used while a new one cannot be had and the old
// one has not expired.
const (
	tokenRefreshFraction = 0.8
	tokenMaxAge          = 24 * time.Hour
	// defaultTokenExpiration is the API's default expirationSeconds of a
	// serviceAccountToken projection.
	defaultTokenExpiration = 3600
)

// tokenKey identifies one token the agent keeps: the kubelet's key
// (service account, audience, lifetime, bound pod).
type tokenKey struct {
	namespace, serviceAccount, audience string
	expirationSeconds                   int64
	pod                                 types.UID
}

// tokens caches the service-account tokens of the agent's pods and asks
// the source for a new one when one is due for rotation.
type tokens struct {
	src   PodResources
	clock clock.PassiveClock

	mu    sync.Mutex
	cache map[tokenKey]*authenticationv1.TokenRequest
}

func newTokens(src PodResources, clk clock.PassiveClock) *tokens {
	return &tokens{src: src, clock: clk, cache: map[tokenKey]*authenticationv1.TokenRequest{}}
}

// token is the token of pod's service account for proj: the cached one
// unless it is due for rotation (see needsRefresh), else a new one; an
// old one that has not expired is kept when the request fails.
func (t *tokens) token(ctx context.Context, pod *corev1.Pod, proj *corev1.ServiceAccountTokenProjection) (string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(defaultTokenExpiration)
	if proj.ExpirationSeconds != nil {
		exp = *proj.ExpirationSeconds
	}
	key := tokenKey{namespace: pod.Namespace, serviceAccount: sa, audience: proj.Audience, expirationSeconds: exp, pod: pod.UID}
	t.mu.Lock()
	cached := t.cache[key]
	t.mu.Unlock()
	now := t.clock.Now()
	if cached != nil && !needsRefresh(cached, now) {
		return cached.Status.Token, nil
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	if proj.Audience != "" {
		req.Spec.Audiences = []string{proj.Audience}
	}
	got, err := t.src.ServiceAccountToken(ctx, pod.Namespace, sa, req)
	if err == nil && (got == nil || got.Status.Token == "") {
		err = fmt.Errorf("the API server gave no token")
	}
	if err != nil {
		if cached != nil && now.Before(cached.Status.ExpirationTimestamp.Time) {
			return cached.Status.Token, nil
		}
		return "", fmt.Errorf("failed to fetch token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	if got.Spec.ExpirationSeconds == nil {
		got.Spec.ExpirationSeconds = &exp
	}
	t.mu.Lock()
	t.cache[key] = got
	t.mu.Unlock()
	return got.Status.Token, nil
}

// needsRefresh is the kubelet's rotation rule (without its jitter of up
// to 10 s): 80% of the token's life has passed, or a day.
func needsRefresh(tr *authenticationv1.TokenRequest, now time.Time) bool {
	exp := tr.Status.ExpirationTimestamp.Time
	life := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	issued := exp.Add(-life)
	if now.After(issued.Add(tokenMaxAge)) {
		return true
	}
	return now.After(issued.Add(time.Duration(float64(life) * tokenRefreshFraction)))
}

// forget drops the tokens bound to the pod of uid.
func (t *tokens) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.cache {
		if k.pod == uid {
			delete(t.cache, k)
		}
	}
}

// podObjects reads the configMaps and secrets of one pod's namespace
// through the source, each once per set-up (so every volume and variable
// of one sync sees one version of an object).
type podObjects struct {
	ctx       context.Context
	src       PodResources
	namespace string
	cms       map[string]*corev1.ConfigMap
	secrets   map[string]*corev1.Secret
	errs      map[string]error
	invalid   func(kind, name string, keys []string)
}

func newPodObjects(ctx context.Context, src PodResources, namespace string) *podObjects {
	return &podObjects{ctx: ctx, src: src, namespace: namespace, cms: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, errs: map[string]error{}}
}

// configMap is the configMap name; nil, nil when it does not exist.
func (o *podObjects) configMap(name string) (*corev1.ConfigMap, error) {
	if cm, ok := o.cms[name]; ok {
		return cm, o.errs["cm/"+name]
	}
	cm, err := o.src.ConfigMap(o.ctx, o.namespace, name)
	if apierrors.IsNotFound(err) {
		cm, err = nil, nil
	}
	o.cms[name], o.errs["cm/"+name] = cm, err
	return cm, err
}

// secret is the secret name; nil, nil when it does not exist.
func (o *podObjects) secret(name string) (*corev1.Secret, error) {
	if s, ok := o.secrets[name]; ok {
		return s, o.errs["secret/"+name]
	}
	s, err := o.src.Secret(o.ctx, o.namespace, name)
	if apierrors.IsNotFound(err) {
		s, err = nil, nil
	}
	o.secrets[name], o.errs["secret/"+name] = s, err
	return s, err
}

// ConfigMap implements podcri.EnvObjects.
func (o *podObjects) ConfigMap(name string) (map[string]string, bool, error) {
	cm, err := o.configMap(name)
	if err != nil || cm == nil {
		return nil, false, err
	}
	return cm.Data, true, nil
}

// Secret implements podcri.EnvObjects.
func (o *podObjects) Secret(name string) (map[string][]byte, bool, error) {
	s, err := o.secret(name)
	if err != nil || s == nil {
		return nil, false, err
	}
	return secretData(s), true, nil
}

// InvalidKeys implements podcri.EnvObjects.
func (o *podObjects) InvalidKeys(kind, name string, keys []string) {
	if o.invalid != nil {
		o.invalid(kind, name, keys)
	}
}

// secretData is a secret's data with its stringData merged in, as the API
// server would store it (a source that hands over an object as written).
func secretData(s *corev1.Secret) map[string][]byte {
	if len(s.StringData) == 0 {
		return s.Data
	}
	out := make(map[string][]byte, len(s.Data)+len(s.StringData))
	for k, v := range s.Data {
		out[k] = v
	}
	for k, v := range s.StringData {
		out[k] = []byte(v)
	}
	return out
}

// isNilSource reports whether src is a nil pointer (or map, func...) held
// in a non-nil interface, which would panic on its first call.
func isNilSource(src PodResources) bool {
	if src == nil {
		return false
	}
	v := reflect.ValueOf(src)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return v.IsNil()
	}
	return false
}
