package podcri

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func field(p string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: p}}
}

func resField(r, div string) *corev1.EnvVarSource {
	s := &corev1.ResourceFieldSelector{Resource: r}
	if div != "" {
		s.Divisor = resource.MustParse(div)
	}
	return &corev1.EnvVarSource{ResourceFieldRef: s}
}

func TestEnv(t *testing.T) {
	cases := []struct {
		name string
		src  *corev1.EnvVarSource
		val  string
		want string
	}{
		{"plain value", nil, "v", "v"},
		{"fieldRef metadata.name is the pod name", field("metadata.name"), "", "web"},
		{"fieldRef metadata.namespace", field("metadata.namespace"), "", "default"},
		{"fieldRef metadata.uid", field("metadata.uid"), "", "u1"},
		{"fieldRef spec.nodeName", field("spec.nodeName"), "", "node1"},
		{"fieldRef spec.serviceAccountName", field("spec.serviceAccountName"), "", "sa"},
		{"fieldRef status.hostIP from the caller", field("status.hostIP"), "", "10.0.0.1"},
		{"fieldRef status.podIP from the caller", field("status.podIP"), "", "10.1.0.5"},
		{"fieldRef metadata.labels subscript", field("metadata.labels['app']"), "", "web"},
		{"fieldRef metadata.annotations subscript", field("metadata.annotations['note']"), "", "x"},
		{"resourceFieldRef limits.cpu rounds up to whole cpus", resField("limits.cpu", ""), "", "2"},
		{"resourceFieldRef limits.cpu with divisor 1m", resField("limits.cpu", "1m"), "", "1500"},
		{"resourceFieldRef limits.memory with divisor 1Mi", resField("limits.memory", "1Mi"), "", "256"},
		{"resourceFieldRef requests.memory in bytes", resField("requests.memory", ""), "", "134217728"},
		{"resourceFieldRef requests.cpu", resField("requests.cpu", "1m"), "", "500"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.NodeName, pod.Spec.ServiceAccountName = "node1", "sa"
			c := &pod.Spec.Containers[0]
			c.Resources.Limits = rl("cpu", "1500m", "memory", "256Mi")
			c.Resources.Requests = rl("cpu", "500m", "memory", "128Mi")
			c.Env = []corev1.EnvVar{{Name: "X", Value: tc.val, ValueFrom: tc.src}}
			cfg, err := ContainerConfig(pod, c, WithPodIPs("10.0.0.1", "10.1.0.5"))
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Envs) != 1 || cfg.Envs[0].Key != "X" || string(cfg.Envs[0].Value) != tc.want {
				t.Errorf("envs %v, want X=%s", cfg.Envs, tc.want)
			}
		})
	}
}

func TestEnvRefused(t *testing.T) {
	cases := []struct {
		name    string
		env     []corev1.EnvVar
		envFrom []corev1.EnvFromSource
		wantVar string
	}{
		{"configMapKeyRef needs the API server", []corev1.EnvVar{{Name: "CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}}}, nil, "CM"},
		{"secretKeyRef needs the API server", []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}, nil, "S"},
		{"status.podIP without WithPodIPs", []corev1.EnvVar{{Name: "IP", ValueFrom: field("status.podIP")}}, nil, "IP"},
		{"unsupported fieldRef", []corev1.EnvVar{{Name: "F", ValueFrom: field("status.podIPs")}}, nil, "F"},
		{"resourceFieldRef of an unset limit", []corev1.EnvVar{{Name: "L", ValueFrom: resField("limits.cpu", "")}}, nil, "L"},
		{"envFrom is refused", nil, []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			c := &pod.Spec.Containers[0]
			c.Env, c.EnvFrom = tc.env, tc.envFrom
			_, err := ContainerConfig(pod, c)
			var ee *EnvError
			if !errors.As(err, &ee) || ee.Container != "app" || ee.Variable != tc.wantVar {
				t.Fatalf("err %v, want an *EnvError for app/%s", err, tc.wantVar)
			}
		})
	}
}
