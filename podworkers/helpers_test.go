package podworkers_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncpod/syncpod/podworkers"
)

// rec is one Syncer call as the fake saw it.
type rec struct {
	call   string // SyncPod, Terminating, Terminated, RuntimePod
	uid    types.UID
	reason podworkers.UpdateType
	pod    *corev1.Pod
	grace  time.Duration
}

// fakeSyncer records every call and lets a test decide each call's outcome.
type fakeSyncer struct {
	mu    sync.Mutex
	log   []rec
	calls chan rec // every call, when it starts

	syncPod     func(ctx context.Context, r rec) (podworkers.Result, error)
	terminating func(ctx context.Context, r rec) error
	terminated  func(ctx context.Context, r rec) error
}

func newFake() *fakeSyncer { return &fakeSyncer{calls: make(chan rec, 100000)} }

func (f *fakeSyncer) record(r rec) {
	f.mu.Lock()
	f.log = append(f.log, r)
	f.mu.Unlock()
	f.calls <- r
}

func (f *fakeSyncer) SyncPod(ctx context.Context, t podworkers.UpdateType, pod *corev1.Pod) (podworkers.Result, error) {
	r := rec{call: "SyncPod", uid: pod.UID, reason: t, pod: pod}
	f.record(r)
	if f.syncPod != nil {
		return f.syncPod(ctx, r)
	}
	return podworkers.Result{}, nil
}

func (f *fakeSyncer) SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, grace time.Duration) error {
	r := rec{call: "Terminating", uid: pod.UID, pod: pod, grace: grace}
	f.record(r)
	if f.terminating != nil {
		return f.terminating(ctx, r)
	}
	return nil
}

func (f *fakeSyncer) SyncTerminatedPod(ctx context.Context, pod *corev1.Pod) error {
	r := rec{call: "Terminated", uid: pod.UID, pod: pod}
	f.record(r)
	if f.terminated != nil {
		return f.terminated(ctx, r)
	}
	return nil
}

func (f *fakeSyncer) SyncTerminatingRuntimePod(ctx context.Context, pod podworkers.RuntimePod, grace time.Duration) error {
	f.record(rec{call: "RuntimePod", uid: pod.UID, grace: grace})
	return nil
}

// snapshot returns the calls made so far.
func (f *fakeSyncer) snapshot() []rec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]rec(nil), f.log...)
}

// next returns the next call, failing the test if none comes.
func (f *fakeSyncer) next(t *testing.T) rec {
	t.Helper()
	select {
	case r := <-f.calls:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no Syncer call came")
		return rec{}
	}
}

func newWorkers(t *testing.T, s podworkers.Syncer, opts ...podworkers.Option) *podworkers.Workers {
	t.Helper()
	w, err := podworkers.New(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// settle waits until w has nothing queued or running and holds no goroutine.
func settle(t *testing.T, w *podworkers.Workers) {
	t.Helper()
	eventually(t, "the workers settled", func() string {
		if s := w.Stats(); s.Queued != 0 || s.Running != 0 || s.Goroutines != 0 {
			return fmt.Sprintf("%+v", s)
		}
		return ""
	})
}

// eventually polls cond until it returns "", yielding between polls; after a
// long safety limit (a hang, not a timing assertion) it fails the test with
// cond's last answer.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		last := cond()
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %s; last: %s", what, last)
		}
		runtime.Gosched()
	}
}

func pod(uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)}}
}

func update(t *testing.T, w *podworkers.Workers, u podworkers.PodUpdate) {
	t.Helper()
	if err := w.Update(u); err != nil {
		t.Fatalf("Update(%v %s): %v", u.Type, u.Pod.GetUID(), err)
	}
}

func create(t *testing.T, w *podworkers.Workers, p *corev1.Pod) {
	t.Helper()
	update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateCreate, Pod: p})
}

func calls(rs []rec) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.call + "/" + string(r.uid)
	}
	return out
}
