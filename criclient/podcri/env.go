package podcri

import (
	"fmt"
	"math"
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
// envFrom is an *EnvError naming the container and variable. $(VAR)
// references are not expanded.
func Env(pod *corev1.Pod, c *corev1.Container, hostIP, podIP string) ([]*runtimeapi.KeyValue, error) {
	if pod == nil {
		return nil, &ArgError{Method: "Env", Arg: "pod", Reason: "must not be nil"}
	}
	if c == nil {
		return nil, &ArgError{Method: "Env", Arg: "container", Reason: "must not be nil"}
	}
	if len(c.EnvFrom) > 0 {
		return nil, &EnvError{Container: c.Name, Reason: "envFrom needs the API server and is not supported"}
	}
	out := make([]*runtimeapi.KeyValue, 0, len(c.Env))
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			var err error
			if v, err = resolveValueFrom(pod, c, e, hostIP, podIP); err != nil {
				return nil, err
			}
		}
		out = append(out, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(v)})
	}
	return out, nil
}

var subscript = regexp.MustCompile(`^metadata\.(labels|annotations)\['(.+)'\]$`)

func resolveValueFrom(pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar, hostIP, podIP string) (string, error) {
	bad := func(reason string) error { return &EnvError{Container: c.Name, Variable: e.Name, Reason: reason} }
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
