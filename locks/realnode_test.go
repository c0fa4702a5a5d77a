package locks_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/testnode"
	"github.com/syncpod/syncpod/locks"
)

// TestRealNodeKeyedMutexEnsureSandbox runs the kubelet's "ensure the pod's
// sandbox exists" check-then-create from several goroutines per pod against
// real containerd. Under the pod's KeyedMutex every pod ends up with exactly
// one sandbox and no call fails; without it, the concurrent creates race on
// containerd's sandbox name reservation.
func TestRealNodeKeyedMutexEnsureSandbox(t *testing.T) {
	n := testnode.Start(t)
	rs := n.RuntimeService()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	km := locks.NewKeyedMutex[string]()
	ensure := func(uid string) error {
		if err := km.Lock(ctx, uid); err != nil {
			return err
		}
		defer func() { _ = km.Unlock(uid) }()
		list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{
			Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}},
		})
		if err != nil {
			return fmt.Errorf("list %s: %w", uid, err)
		}
		if len(list.Items) > 0 {
			return nil
		}
		if _, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: n.SandboxConfig("p-"+uid, uid)}); err != nil {
			return fmt.Errorf("run %s: %w", uid, err)
		}
		return nil
	}

	const pods, workersPerPod = 3, 4
	var wg sync.WaitGroup
	for p := range pods {
		uid := fmt.Sprint("uid-", p)
		for range workersPerPod {
			wg.Go(func() {
				if err := ensure(uid); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()

	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	perPod := map[string]int{}
	for _, sb := range list.Items {
		perPod[sb.GetMetadata().GetUid()]++
	}
	for p := range pods {
		if uid := fmt.Sprint("uid-", p); perPod[uid] != 1 {
			t.Errorf("pod %s has %d sandboxes, want 1 (all: %v)", uid, perPod[uid], perPod)
		}
	}
	if km.Len() != 0 {
		t.Fatalf("KeyedMutex.Len = %d after all unlocked", km.Len())
	}
}
