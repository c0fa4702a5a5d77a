package provider

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
)

// publishHookClock runs hook once, inside the first Now called directly by
// publishPubLocked: the moment that decides which status is stored.
type publishHookClock struct {
	*clocktesting.FakeClock
	hook atomic.Pointer[func()]
}

func (c *publishHookClock) Now() time.Time {
	if pc, _, _, ok := runtime.Caller(1); ok {
		if fn := runtime.FuncForPC(pc); fn != nil && strings.HasSuffix(fn.Name(), ".publishPubLocked") {
			if h := c.hook.Swap(nil); h != nil {
				(*h)()
			}
		}
	}
	return c.FakeClock.Now()
}

// A DeletePod that lands in the middle of a publish of the pod's worker
// leaves no status behind: publish's check and Set are atomic with
// DeletePod's removal and Delete.
func TestDeletePodDuringPublishLeavesNoStatus(t *testing.T) {
	srv, err := crisim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c, err := criclient.Dial(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	clk := &publishHookClock{FakeClock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))}
	p, err := New(ctx, c.CRI(), c.CRI(), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.test/app:1"}}}}
	// A registered worker that does not run, so only this test publishes.
	w := newPodWorker(p, pod)
	p.mu.Lock()
	p.workers[w.key], p.byUID[w.uid] = w, w
	p.mu.Unlock()

	var deleted atomic.Bool
	del := func() {
		if err := p.DeletePod(ctx, pod); err != nil {
			t.Errorf("DeletePod: %v", err)
		}
		deleted.Store(true)
	}
	clk.hook.Store(&del)
	p.publish(w)
	if !deleted.Load() {
		t.Fatal("DeletePod never ran inside publish: the test no longer forces the interleaving")
	}
	if st, _ := p.statuses.Get(w.key); st != nil {
		t.Errorf("status of deleted pod %s is still stored", w.key)
	}
	if n := p.statuses.Len(); n != 0 {
		t.Errorf("status cache holds %d entries after the only pod was deleted, want 0", n)
	}
	if _, err := p.GetPod(ctx, "default", "web"); err == nil {
		t.Error("GetPod found the deleted pod")
	}
}
