package podcri

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Env is c's environment in order: plain values, and the downward-API
// fields a pod without an API server can use: fieldRef metadata.name,
// metadata.namespace, metadata.uid, spec.nodeName, spec.serviceAccountName,
// status.hostIP and status.podIP (when hostIP / podIP are not empty),
// metadata.labels['k'] and metadata.annotations['k']; resourceFieldRef
// limits.cpu, limits.memory, requests.cpu, requests.memory (and
// limits/requests.ephemeral-storage) with its divisor, rounded up as the
// kubelet does. A configMapKeyRef, secretKeyRef, another field, or any
// envFrom is an *EnvError naming the container and variable (ContainerConfig
// resolves the first two and envFrom with WithEnvObjects). $(VAR)
// references are not expanded.
func Env(pod *corev1.Pod, c *corev1.Container, hostIP, podIP string) ([]*runtimeapi.KeyValue, error) {
	return env("Env", pod, c, hostIP, podIP, nil)
}

// EnvObjects looks up the configMaps and secrets of the pod's namespace
// that a container's env takes values from (see WithEnvObjects). It is
// called while ContainerConfig runs, from its goroutine.
type EnvObjects interface {
	// ConfigMap is the data of the configMap name; found is false when
	// there is no such configMap (err is then nil).
	ConfigMap(name string) (data map[string]string, found bool, err error)
	// Secret is the data of the secret name; found is false when there
	// is no such secret (err is then nil).
	Secret(name string) (data map[string][]byte, found bool, err error)
	// InvalidKeys is told the keys of one envFrom source (kind
	// "configMap" or "secret", its name) that were skipped because,
	// prefixed, they are not valid variable names: the kubelet's
	// InvalidEnvironmentVariableNames event.
	InvalidKeys(kind, name string, keys []string)
}

func env(method string, pod *corev1.Pod, c *corev1.Container, hostIP, podIP string, objs EnvObjects) ([]*runtimeapi.KeyValue, error) {
	if pod == nil {
		return nil, &ArgError{Method: method, Arg: "pod", Reason: "must not be nil"}
	}
	if c == nil {
		return nil, &ArgError{Method: method, Arg: "container", Reason: "must not be nil"}
	}
	if len(c.EnvFrom) > 0 && objs == nil {
		return nil, &EnvError{Container: c.Name, Reason: "envFrom needs the API server and is not supported"}
	}
	fromSources, err := envFromSources(pod, c, objs)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(c.Env))
	for _, e := range c.Env {
		set[e.Name] = true
	}
	out := make([]*runtimeapi.KeyValue, 0, len(fromSources)+len(c.Env))
	for _, kv := range fromSources {
		if !set[kv.Key] { // env wins over envFrom
			out = append(out, kv)
		}
	}
	for _, e := range c.Env {
		v := []byte(e.Value)
		if e.ValueFrom != nil {
			var ok bool
			if v, ok, err = resolveValueFrom(pod, c, e, hostIP, podIP, objs); err != nil {
				return nil, err
			}
			if !ok {
				continue // an optional key or object that is not there
			}
		}
		out = append(out, &runtimeapi.KeyValue{Key: e.Name, Value: v})
	}
	return out, nil
}

// envFromSources is the variables of c's envFrom sources, as the kubelet makes
// them: each source's keys (a configMap's data, not its binaryData),
// prefixed, in key order; a later source's key replaces an earlier one's;
// a key that is not a valid variable name once prefixed is skipped and
// reported (EnvObjects.InvalidKeys); a missing optional source adds
// nothing, a missing required one is an *EnvError.
func envFromSources(pod *corev1.Pod, c *corev1.Container, objs EnvObjects) ([]*runtimeapi.KeyValue, error) {
	if len(c.EnvFrom) == 0 {
		return nil, nil
	}
	var out []*runtimeapi.KeyValue
	at := map[string]int{}
	add := func(k string, v []byte) {
		if i, ok := at[k]; ok {
			out[i].Value = v
			return
		}
		at[k] = len(out)
		out = append(out, &runtimeapi.KeyValue{Key: k, Value: v})
	}
	for _, src := range c.EnvFrom {
		var (
			kind, name string
			optional   bool
			data       = map[string][]byte{}
			found      bool
			err        error
		)
		switch {
		case src.ConfigMapRef != nil:
			kind, name, optional = "configMap", src.ConfigMapRef.Name, ptrTrue(src.ConfigMapRef.Optional)
			var m map[string]string
			m, found, err = objs.ConfigMap(name)
			for k, v := range m {
				data[k] = []byte(v)
			}
		case src.SecretRef != nil:
			kind, name, optional = "secret", src.SecretRef.Name, ptrTrue(src.SecretRef.Optional)
			data, found, err = objs.Secret(name)
		default:
			return nil, &EnvError{Container: c.Name, Reason: "an envFrom source needs a configMapRef or a secretRef"}
		}
		if err != nil {
			return nil, &EnvError{Container: c.Name, Reason: fmt.Sprintf("envFrom %s %s/%s: %v", kind, pod.Namespace, name, err)}
		}
		if !found {
			if optional {
				continue
			}
			return nil, &EnvError{Container: c.Name, Reason: fmt.Sprintf("%s %q not found", strings.ToLower(kind), name)}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var invalid []string
		for _, k := range keys {
			name := src.Prefix + k
			if len(validation.IsEnvVarName(name)) != 0 {
				invalid = append(invalid, name)
				continue
			}
			add(name, data[k])
		}
		if len(invalid) > 0 {
			objs.InvalidKeys(kind, name, invalid)
		}
	}
	return out, nil
}

func ptrTrue(b *bool) bool { return b != nil && *b }

var subscript = regexp.MustCompile(`^metadata\.(labels|annotations)\['(.+)'\]$`)

// resolveValueFrom is the value of e; ok is false for an optional key
// (or object) that is not there, which the kubelet leaves out.
func resolveValueFrom(pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar, hostIP, podIP string, objs EnvObjects) (v []byte, ok bool, err error) {
	bad := func(reason string) error { return &EnvError{Container: c.Name, Variable: e.Name, Reason: reason} }
	vf := e.ValueFrom
	switch {
	case vf.ConfigMapKeyRef != nil && objs != nil:
		ref := vf.ConfigMapKeyRef
		data, found, err := objs.ConfigMap(ref.Name)
		if err != nil {
			return nil, false, bad(fmt.Sprintf("configMap %s/%s: %v", pod.Namespace, ref.Name, err))
		}
		val, has := data[ref.Key]
		switch {
		case has:
			return []byte(val), true, nil
		case ptrTrue(ref.Optional):
			return nil, false, nil
		case !found:
			return nil, false, bad(fmt.Sprintf("configmap %q not found", ref.Name))
		}
		return nil, false, bad(fmt.Sprintf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name))
	case vf.SecretKeyRef != nil && objs != nil:
		ref := vf.SecretKeyRef
		data, found, err := objs.Secret(ref.Name)
		if err != nil {
			return nil, false, bad(fmt.Sprintf("secret %s/%s: %v", pod.Namespace, ref.Name, err))
		}
		val, has := data[ref.Key]
		switch {
		case has:
			return val, true, nil
		case ptrTrue(ref.Optional):
			return nil, false, nil
		case !found:
			return nil, false, bad(fmt.Sprintf("secret %q not found", ref.Name))
		}
		return nil, false, bad(fmt.Sprintf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name))
	}
	s, err := resolveField(pod, c, e, hostIP, podIP, bad)
	return []byte(s), err == nil, err
}

func resolveField(pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar, hostIP, podIP string, bad func(string) error) (string, error) {
	vf := e.ValueFrom
	switch {
	case vf.FieldRef != nil:
		p := vf.FieldRef.FieldPath
		if v, ok := metadataField(pod, p); ok {
			return v, nil
		}
		switch p {
		case "spec.nodeName":
			return pod.Spec.NodeName, nil
		case "spec.serviceAccountName":
			return pod.Spec.ServiceAccountName, nil
		case "status.hostIP":
			if hostIP == "" {
				return "", bad("status.hostIP needs WithPodIPs")
			}
			return hostIP, nil
		case "status.podIP":
			if podIP == "" {
				return "", bad("status.podIP needs WithPodIPs")
			}
			return podIP, nil
		default:
			return "", bad(fmt.Sprintf("fieldRef %q is not supported", p))
		}
	case vf.ResourceFieldRef != nil:
		return resourceField(c, vf.ResourceFieldRef, bad)
	case vf.ConfigMapKeyRef != nil:
		return "", bad("configMapKeyRef needs the API server and is not supported")
	case vf.SecretKeyRef != nil:
		return "", bad("secretKeyRef needs the API server and is not supported")
	default:
		return "", bad("valueFrom is not supported")
	}
}

// resourceField follows the downward API: the quantity divided by the
// divisor (default 1), rounded up; a missing limit reads as the node's
// allocatable in the kubelet, which podcri does not know, so it is an error.
func resourceField(c *corev1.Container, ref *corev1.ResourceFieldSelector, bad func(string) error) (string, error) {
	var list corev1.ResourceList
	var name corev1.ResourceName
	switch ref.Resource {
	case "limits.cpu", "limits.memory", "limits.ephemeral-storage":
		list, name = c.Resources.Limits, corev1.ResourceName(ref.Resource[len("limits."):])
	case "requests.cpu", "requests.memory", "requests.ephemeral-storage":
		list, name = c.Resources.Requests, corev1.ResourceName(ref.Resource[len("requests."):])
	default:
		return "", bad(fmt.Sprintf("resourceFieldRef %q is not supported", ref.Resource))
	}
	q, ok := list[name]
	if !ok {
		return "", bad(fmt.Sprintf("resourceFieldRef %q: the container sets no such value", ref.Resource))
	}
	divisor := resource.MustParse("1")
	if !ref.Divisor.IsZero() {
		divisor = ref.Divisor
	}
	if name == corev1.ResourceCPU {
		v := math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))
		return strconv.FormatInt(int64(v), 10), nil
	}
	v := math.Ceil(float64(q.Value()) / float64(divisor.Value()))
	return strconv.FormatInt(int64(v), 10), nil
}

// metadataField is the value of a fieldRef path that both env variables and
// downward-API files take: the pod's name, namespace and uid, and one
// label or annotation by key (metadata.labels['k']).
func metadataField(pod *corev1.Pod, path string) (string, bool) {
	switch path {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	}
	if m := subscript.FindStringSubmatch(path); m != nil {
		if m[1] == "labels" {
			return pod.Labels[m[2]], true
		}
		return pod.Annotations[m[2]], true
	}
	return "", false
}
