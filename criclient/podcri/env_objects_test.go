package podcri

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// fakeObjects is an EnvObjects over fixed maps.
type fakeObjects struct {
	cms     map[string]map[string]string
	secrets map[string]map[string][]byte
	invalid []string
}

func (f *fakeObjects) ConfigMap(name string) (map[string]string, bool, error) {
	if name == "broken" {
		return nil, false, errors.New("the API server is away")
	}
	m, ok := f.cms[name]
	return m, ok, nil
}

func (f *fakeObjects) Secret(name string) (map[string][]byte, bool, error) {
	m, ok := f.secrets[name]
	return m, ok, nil
}

func (f *fakeObjects) InvalidKeys(kind, name string, keys []string) {
	f.invalid = append(f.invalid, kind+"/"+name+":"+strings.Join(keys, ","))
}

func newFakeObjects() *fakeObjects {
	return &fakeObjects{
		cms: map[string]map[string]string{
			"cfg":   {"LEVEL": "debug", "MODE": "fast", "has space": "x", "1st": "y"},
			"other": {"MODE": "slow"},
		},
		secrets: map[string]map[string][]byte{"creds": {"PASSWORD": []byte("s3cret"), "USER": []byte("alice")}},
	}
}

func cmRef(name, key string, optional bool) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(optional)}}
}

func secretRef(name, key string, optional bool) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(optional)}}
}

// envFrom sources in order (a later source's key wins, keys sorted,
// invalid names skipped and reported), then env, which wins over
// envFrom; optional references to missing keys or objects add nothing.
func TestEnvWithObjects(t *testing.T) {
	pod := testPod()
	c := &pod.Spec.Containers[0]
	c.EnvFrom = []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}},
		{Prefix: "DB_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}},
	}
	c.Env = []corev1.EnvVar{
		{Name: "LEVEL", Value: "info"},
		{Name: "FROM_CM", ValueFrom: cmRef("cfg", "MODE", false)},
		{Name: "FROM_SECRET", ValueFrom: secretRef("creds", "USER", false)},
		{Name: "OPT_KEY", ValueFrom: cmRef("cfg", "nosuch", true)},
		{Name: "OPT_OBJ", ValueFrom: secretRef("absent", "k", true)},
	}
	objs := newFakeObjects()
	cfg, err := ContainerConfig(pod, c, WithEnvObjects(objs))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range cfg.Envs {
		got = append(got, kv.Key+"="+string(kv.Value))
	}
	want := []string{"MODE=slow", "DB_PASSWORD=s3cret", "DB_USER=alice", "LEVEL=info", "FROM_CM=fast", "FROM_SECRET=alice"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("env %q, want %q", got, want)
	}
	if want := []string{"configMap/cfg:1st,has space"}; !reflect.DeepEqual(objs.invalid, want) {
		t.Errorf("invalid keys reported %q, want %q", objs.invalid, want)
	}
}

func TestEnvWithObjectsRefused(t *testing.T) {
	cases := []struct {
		name    string
		env     []corev1.EnvVar
		envFrom []corev1.EnvFromSource
		wantVar string
		want    string
	}{
		{"missing configMap", []corev1.EnvVar{{Name: "A", ValueFrom: cmRef("absent", "k", false)}}, nil, "A", `configmap "absent" not found`},
		{"missing key", []corev1.EnvVar{{Name: "A", ValueFrom: cmRef("cfg", "k", false)}}, nil, "A", "couldn't find key k in ConfigMap default/cfg"},
		{"missing secret key", []corev1.EnvVar{{Name: "A", ValueFrom: secretRef("creds", "k", false)}}, nil, "A", "couldn't find key k in Secret default/creds"},
		{"lookup fails", []corev1.EnvVar{{Name: "A", ValueFrom: cmRef("broken", "k", true)}}, nil, "A", "the API server is away"},
		{"missing envFrom secret", nil, []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}}}, "", `secret "absent" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			c := &pod.Spec.Containers[0]
			c.Env, c.EnvFrom = tc.env, tc.envFrom
			_, err := ContainerConfig(pod, c, WithEnvObjects(newFakeObjects()))
			var ee *EnvError
			if !errors.As(err, &ee) || ee.Container != "app" || ee.Variable != tc.wantVar || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want an *EnvError for app/%s saying %q", err, tc.wantVar, tc.want)
			}
		})
	}
}

// A typed-nil EnvObjects is a *ConfigError, not a panic.
func TestEnvObjectsTypedNil(t *testing.T) {
	pod := testPod()
	_, err := ContainerConfig(pod, &pod.Spec.Containers[0], WithEnvObjects((*fakeObjects)(nil)))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Option != "WithEnvObjects" {
		t.Fatalf("err %v, want a *ConfigError for WithEnvObjects", err)
	}
}
