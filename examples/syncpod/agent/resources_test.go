package agent_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

// fakeResources is an agent.PodResources over maps: set and remove wake
// the registered pods, as a watch would; tokens are numbered.
type fakeResources struct {
	mu      sync.Mutex
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
	pods    map[types.UID]func(types.UID)
	tokens  []*authenticationv1.TokenRequest
}

var _ agent.PodResources = (*fakeResources)(nil)

func newFakeResources() *fakeResources {
	return &fakeResources{cms: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}, pods: map[types.UID]func(types.UID){}}
}

func (f *fakeResources) RegisterPod(pod *corev1.Pod, changed func(types.UID)) {
	f.mu.Lock()
	f.pods[pod.UID] = changed
	f.mu.Unlock()
}

func (f *fakeResources) UnregisterPod(uid types.UID) {
	f.mu.Lock()
	delete(f.pods, uid)
	f.mu.Unlock()
}

func (f *fakeResources) registered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pods)
}

func (f *fakeResources) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cm, ok := f.cms[ns+"/"+name]; ok {
		return cm.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
}

func (f *fakeResources) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func (f *fakeResources) ServiceAccountToken(_ context.Context, ns, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := req.DeepCopy()
	out.Status.Token = fmt.Sprintf("token-%d-%s/%s-%v", len(f.tokens), ns, name, req.Spec.Audiences)
	out.Status.ExpirationTimestamp = metav1.NewTime(time.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	f.tokens = append(f.tokens, out)
	return out, nil
}

// set stores obj (a *corev1.ConfigMap or *corev1.Secret) and wakes every
// registered pod.
func (f *fakeResources) set(obj any) {
	f.mu.Lock()
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		f.cms[o.Namespace+"/"+o.Name] = o
	case *corev1.Secret:
		f.secrets[o.Namespace+"/"+o.Name] = o
	}
	wake := map[types.UID]func(types.UID){}
	for uid, w := range f.pods {
		wake[uid] = w
	}
	f.mu.Unlock()
	for uid, w := range wake {
		w(uid)
	}
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: data}
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// configMap, secret and projected volumes from a PodResources: items,
// keys, modes and optional honoured; the secret and the projected volume
// on a tmpfs (as root); a configMap change rewrites the files through a
// new ..data version, and the old version goes; the pod's deletion
// unregisters it and removes its directory, tmpfs and all.
func TestResourceVolumes(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			n := startSim(t, crisim.WithImage(volImage, 1))
			podDir := t.TempDir()
			res := newFakeResources()
			res.set(configMap("app-config", map[string]string{"level": "debug", "name": "web"}))
			res.set(configMap("kube-root-ca.crt", map[string]string{"ca.crt": "CA"}))
			res.set(secret("creds", map[string]string{"password": "s3cret", "user": "alice"}))
			a, rec := startVolumeAgent(t, n, podDir, agent.WithMode(mode), agent.WithPodResources(res))
			tokenExp := int64(3607)
			pod := volumePod("res", []corev1.Volume{
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, DefaultMode: ptr.To[int32](0o640),
					Items: []corev1.KeyToPath{{Key: "level", Path: "conf/level"}, {Key: "name", Path: "name", Mode: ptr.To[int32](0o600)}}}}},
				{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: ptr.To[int32](0o400)}}},
				{Name: "opt", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					DefaultMode: ptr.To[int32](0o644),
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &tokenExp}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
							Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
						{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
							{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
					}}}},
			}, mounting("app",
				corev1.VolumeMount{Name: "cfg", MountPath: "/cfg"}, corev1.VolumeMount{Name: "sec", MountPath: "/sec"},
				corev1.VolumeMount{Name: "opt", MountPath: "/opt"},
				corev1.VolumeMount{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}))
			pod.Spec.ServiceAccountName = "builder"
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
			waitFor(t, "the pod running", allRunning(a, 1), func() string { return podState(a, "res").Message })

			vols := filepath.Join(podDir, string(agent.StaticPodUID(pod)), "volumes")
			cfg := filepath.Join(vols, "kubernetes.io~configmap", "cfg")
			sec := filepath.Join(vols, "kubernetes.io~secret", "sec")
			proj := filepath.Join(vols, "kubernetes.io~projected", "kube-api-access")
			for path, want := range map[string]string{
				filepath.Join(cfg, "conf/level"): "debug", filepath.Join(cfg, "name"): "web",
				filepath.Join(sec, "password"): "s3cret", filepath.Join(sec, "user"): "alice",
				filepath.Join(proj, "ca.crt"): "CA", filepath.Join(proj, "namespace"): "default",
				filepath.Join(proj, "token"): "token-0-default/builder-[]",
			} {
				if got := readFile(t, path); got != want {
					t.Errorf("%s: %q, want %q", path, got, want)
				}
			}
			for path, want := range map[string]os.FileMode{
				filepath.Join(cfg, "conf/level"): 0o640, filepath.Join(cfg, "name"): 0o600,
				filepath.Join(sec, "password"): 0o400, filepath.Join(proj, "token"): 0o644,
			} {
				if got := fileMode(t, path); got != want {
					t.Errorf("%s: mode %o, want %o", path, got, want)
				}
			}
			if entries, err := os.ReadDir(filepath.Join(vols, "kubernetes.io~configmap", "opt")); err != nil || len(entries) != 2 { // ..data and its version
				t.Errorf("the optional volume of a missing configMap: %v %v, want it empty", entries, err)
			}
			if res.tokens[0].Spec.BoundObjectRef.Name != "res" || res.tokens[0].Spec.BoundObjectRef.UID != agent.StaticPodUID(pod) ||
				*res.tokens[0].Spec.ExpirationSeconds != tokenExp {
				t.Errorf("token request %+v, want one bound to the pod, of its lifetime", res.tokens[0].Spec)
			}
			if os.Geteuid() == 0 {
				for _, dir := range []string{sec, proj} {
					var st syscall.Statfs_t
					if err := syscall.Statfs(dir, &st); err != nil || st.Type != 0x01021994 {
						t.Errorf("%s is not on a tmpfs (%#x, %v)", dir, st.Type, err)
					}
				}
			}
			c := rec.get("res/app")
			if m := mountAt(c, "/sec"); m == nil || m.HostPath != sec || !m.Readonly {
				t.Errorf("secret mount %+v, want %s read-only", m, sec)
			}

			before, err := os.Readlink(filepath.Join(cfg, "..data"))
			if err != nil {
				t.Fatal(err)
			}
			res.set(configMap("app-config", map[string]string{"level": "info", "name": "web"}))
			waitFor(t, "the new level in the file, the old version gone", func() bool {
				b, _ := os.ReadFile(filepath.Join(cfg, "conf/level"))
				return string(b) == "info" && gone(filepath.Join(cfg, before))
			})
			after, err := os.Readlink(filepath.Join(cfg, "..data"))
			if err != nil || after == before {
				t.Errorf("..data %q -> %q (%v): want a new version", before, after, err)
			}
			if l, err := os.Readlink(filepath.Join(cfg, "conf")); err != nil || l != "..data/conf" {
				t.Errorf("conf -> %q (%v), want ..data/conf", l, err)
			}

			a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: pod})
			waitFor(t, "the pod gone and unregistered", func() bool { return a.Snapshot().Total == 0 && res.registered() == 0 })
			if !gone(filepath.Dir(vols)) {
				t.Error("pod directory left")
			}
		})
	}
}

// A missing configMap or key fails the volume with the kubelet's words;
// a source that is not given at all says the API server is needed.
func TestResourceVolumesMissing(t *testing.T) {
	n := startSim(t, crisim.WithImage(volImage, 1))
	res := newFakeResources()
	res.set(configMap("cfg", map[string]string{"a": "1"}))
	a, _ := startVolumeAgent(t, n, t.TempDir(), agent.WithPodResources(res))
	for _, tc := range []struct {
		name string
		src  corev1.VolumeSource
		want string
	}{
		{"no-cm", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}},
			`configmap "absent" not found`},
		{"no-key", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
			Items: []corev1.KeyToPath{{Key: "b", Path: "b"}}}}, "configmap references non-existent config key: b"},
		{"no-secret", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}}}, `secret "s" not found`},
		{"bad-path", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
			Items: []corev1.KeyToPath{{Key: "a", Path: "../a"}}}}, "must not start with '..'"},
	} {
		a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: volumePod(tc.name, []corev1.Volume{{Name: "v", VolumeSource: tc.src}},
			mounting("app", corev1.VolumeMount{Name: "v", MountPath: "/v"}))})
		waitFor(t, tc.want, func() bool { return strings.Contains(podState(a, tc.name).Message, tc.want) },
			func() string { return podState(a, tc.name).Message })
	}
}

// Env from configMaps and secrets: valueFrom (optional honoured) and
// envFrom with a prefix; a key that is not a variable name is skipped
// with the kubelet's event; without a source the variable fails the
// container with a reason that names the API server.
func TestResourceEnv(t *testing.T) {
	n := startSim(t, crisim.WithImage(volImage, 1))
	res := newFakeResources()
	res.set(configMap("cfg", map[string]string{"LEVEL": "debug", "bad key": "x"}))
	res.set(secret("creds", map[string]string{"PASSWORD": "s3cret"}))
	var ev events
	a, rec := startVolumeAgent(t, n, t.TempDir(), agent.WithPodResources(res), agent.WithEventHook(ev.hook))
	c := corev1.Container{Name: "app", Image: volImage,
		EnvFrom: []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		Env: []corev1.EnvVar{
			{Name: "PASS", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "PASSWORD"}}},
			{Name: "MAYBE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "none"}, Key: "k", Optional: ptr.To(true)}}},
		}}
	pod := volumePod("env", nil, c)
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
	waitFor(t, "the pod running", allRunning(a, 1), func() string { return podState(a, "env").Message })
	var got []string
	for _, kv := range rec.get("env/app").GetEnvs() {
		got = append(got, kv.Key+"="+string(kv.Value))
	}
	if strings.Join(got, " ") != "CFG_LEVEL=debug PASS=s3cret" {
		t.Errorf("env %q", got)
	}
	if len(ev.find(func(e agent.Event) bool {
		return e.Type == "InvalidEnvironmentVariableNames" && e.Err != nil && strings.Contains(e.Err.Error(), "[CFG_bad key]")
	})) == 0 {
		t.Error("no InvalidEnvironmentVariableNames event for CFG_bad key")
	}

	static, _ := startVolumeAgent(t, n, t.TempDir())
	static.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: volumePod("env-static", nil, c)})
	waitFor(t, "the refusal", func() bool { return strings.Contains(podState(static, "env-static").Message, "needs the API server") },
		func() string { return podState(static, "env-static").Message })
}

// imagePullSecrets become the pull's AuthConfig: a pod without the
// secret cannot pull the registry image that needs credentials, one with
// it then does (in both modes); no credential reaches the agent's log, even at
// debug level.
func TestPullSecrets(t *testing.T) {
	const private = "reg.example:5000/team/app:1"
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			n := startSim(t, crisim.WithImage("registry.k8s.io/pause:3.10", 1), crisim.WithRegistryImage(private, 1),
				crisim.WithRegistryAuth(private, "alice", "s3cret-pw"))
			res := newFakeResources()
			auth := base64.StdEncoding.EncodeToString([]byte("alice:s3cret-pw"))
			res.set(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "regcred"}, Type: corev1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"https://reg.example:5000/v1/":{"auth":"` + auth + `"},` +
					`"docker.io":{"username":"bob","password":"other-pw"}}}`)}})
			core, logs := observer.New(zapcore.DebugLevel)
			a, _ := startVolumeAgent(t, n, t.TempDir(), agent.WithMode(mode), agent.WithPodResources(res), agent.WithLogger(zap.New(core)))
			with := volumePod("with", nil, corev1.Container{Name: "app", Image: private})
			with.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "missing"}}
			without := volumePod("without", nil, corev1.Container{Name: "app", Image: private})
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: without})
			waitFor(t, "the pull without the secret refused", func() bool { return strings.Contains(podState(a, "without").Message, "401 Unauthorized") },
				func() string { return podState(a, "without").Message })
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: with})
			waitFor(t, "the pod with the secret running", func() bool { return podState(a, "with").State == agent.PodRunning },
				func() string { return podState(a, "with").Message })
			a.Stop()
			for _, e := range logs.All() {
				line := e.Message + fmt.Sprint(e.ContextMap())
				if strings.Contains(line, "s3cret-pw") || strings.Contains(line, auth) || strings.Contains(line, "other-pw") {
					t.Fatalf("a credential in the log: %s", line)
				}
			}
			if logs.FilterMessageSnippet("unable to retrieve pull secret").FilterField(zap.String("secret", "missing")).Len() == 0 {
				t.Error("no warning for the missing pull secret")
			}
		})
	}
}

// A typed-nil source is refused by New; a nil one is ignored.
func TestPodResourcesNil(t *testing.T) {
	n := startSim(t, crisim.WithImage(volImage, 1))
	if _, err := agent.New(n.client.CRI(), n.client.CRI(), agent.WithPodResources((*fakeResources)(nil))); err == nil ||
		!strings.Contains(err.Error(), "Resources") {
		t.Errorf("New with a typed-nil source = %v, want an error naming Node.Resources", err)
	}
	a := startAgent(t, n, agent.WithPodResources(nil))
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: volumePod("plain", nil, corev1.Container{Name: "app", Image: volImage})})
	waitFor(t, "the pod running", allRunning(a, 1))
}
