package provider_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/syncpod/syncpod/examples/virtualkubelet/provider"
)

// wakes records the pods a Resources wakes.
type wakes struct {
	mu  sync.Mutex
	got map[types.UID]int
}

func (w *wakes) changed(uid types.UID) {
	w.mu.Lock()
	w.got[uid]++
	w.mu.Unlock()
}

func (w *wakes) count(uid types.UID) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got[uid]
}

func refPod(uid types.UID, cm string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: string(uid), UID: uid},
		Spec: corev1.PodSpec{
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}},
			Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}},
			Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "P", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "k"}}}}}},
		},
	}
}

// One watch per referenced object, shared by the pods that reference it
// and stopped with the last; reads come from the watch's cache (a
// missing object is NotFound); a change wakes the pods that reference
// the object, and only them.
func TestResourcesWatchWhatPodsReference(t *testing.T) {
	kube := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"}, Data: map[string]string{"k": "1"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"}, Data: map[string]string{"k": "x"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "creds"}, Data: map[string][]byte{"k": []byte("v")}},
	)
	res, err := provider.NewResources(kube, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	w := &wakes{got: map[types.UID]int{}}
	res.RegisterPod(refPod("p1", "app"), w.changed)
	res.RegisterPod(refPod("p2", "app"), w.changed)
	res.RegisterPod(refPod("p3", "other"), w.changed)
	if n := res.Watched(); n != 4 { // app, other, creds, regcred
		t.Fatalf("%d objects watched, want 4", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cm, err := res.ConfigMap(ctx, "default", "app")
	if err != nil || cm.Data["k"] != "1" {
		t.Fatalf("ConfigMap = %v, %v", cm, err)
	}
	if s, err := res.Secret(ctx, "default", "creds"); err != nil || string(s.Data["k"]) != "v" {
		t.Fatalf("Secret = %v, %v", s, err)
	}
	if _, err := res.Secret(ctx, "default", "regcred"); !apierrors.IsNotFound(err) {
		t.Fatalf("Secret(regcred) = %v, want NotFound", err)
	}

	cm.Data["k"] = "2"
	if _, err := kube.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "p1 and p2 woken", func() bool { return w.count("p1") > 0 && w.count("p2") > 0 })
	waitUntil(t, "the new value read", func() bool {
		cm, err := res.ConfigMap(ctx, "default", "app")
		return err == nil && cm.Data["k"] == "2"
	})
	if w.count("p3") != 0 {
		t.Errorf("p3, which does not reference app, was woken %d times", w.count("p3"))
	}
	if _, err := kube.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "regcred"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "p3 woken by the new pull secret", func() bool { return w.count("p3") > 0 })

	res.UnregisterPod("p1")
	if n := res.Watched(); n != 4 {
		t.Errorf("%d objects watched after p1 went, want 4", n)
	}
	res.RegisterPod(refPod("p2", "other"), w.changed) // p2 now references other, not app
	if n := res.Watched(); n != 3 {
		t.Errorf("%d objects watched once no pod references app, want 3", n)
	}
	res.UnregisterPod("p2")
	res.UnregisterPod("p3")
	if n := res.Watched(); n != 0 {
		t.Errorf("%d objects watched with no pod, want 0", n)
	}
	if err := res.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := res.ConfigMap(ctx, "default", "app"); err == nil {
		t.Error("a read after Close succeeded")
	}
	if _, err := provider.NewResources(nil, nil); err == nil {
		t.Error("NewResources(nil) succeeded")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // turns a hang into a failure
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
