package statecache_test

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/testnode"
	"github.com/syncpod/syncpod/statecache"
)

// TestRealNodeSandboxStatusCache fills a Cache from real containerd the way
// a relister does (list sandboxes, Set each status with the relist time,
// Delete the vanished, UpdateTime), while a pod worker waits in
// GetNewerThan for a pod that does not exist yet. The waiter must wake with
// that pod's real status once it is created and relisted.
func TestRealNodeSandboxStatusCache(t *testing.T) {
	n := testnode.Start(t)
	rs := n.RuntimeService()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cache := statecache.New[string, *runtimeapi.PodSandboxStatus]()
	relist := func() time.Time {
		t.Helper()
		start := time.Now()
		list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			t.Fatalf("ListPodSandbox: %v", err)
		}
		seen := map[string]bool{}
		for _, sb := range list.Items {
			uid := sb.GetMetadata().GetUid()
			seen[uid] = true
			resp, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id})
			cache.Set(uid, resp.GetStatus(), err, start)
		}
		for _, uid := range []string{"uid-a", "uid-b"} {
			if !seen[uid] {
				cache.Delete(uid)
			}
		}
		cache.UpdateTime(start)
		return start
	}
	runPod := func(name, uid string) string {
		t.Helper()
		resp, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: n.SandboxConfig(name, uid)})
		if err != nil {
			t.Fatalf("RunPodSandbox(%s): %v", name, err)
		}
		return resp.PodSandboxId
	}

	idA := runPod("a", "uid-a")
	first := relist()
	if st, err := cache.Get("uid-a"); err != nil || st.GetId() != idA || st.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("uid-a after relist: %v, %v", st, err)
	}
	if st, err := cache.Get("uid-b"); st != nil || err != nil {
		t.Fatalf("uid-b before creation: %v, %v", st, err)
	}

	type result struct {
		st  *runtimeapi.PodSandboxStatus
		err error
	}
	woke := make(chan result, 1)
	go func() {
		st, err := cache.GetNewerThan(ctx, "uid-b", first)
		woke <- result{st, err}
	}()

	idB := runPod("b", "uid-b")
	second := relist()
	r := <-woke
	if r.err != nil {
		t.Fatalf("GetNewerThan(uid-b): %v", r.err)
	}
	if r.st.GetId() != idB || r.st.GetMetadata().GetUid() != "uid-b" || r.st.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("GetNewerThan(uid-b) = %v; want ready sandbox %s", r.st, idB)
	}

	// Stop and remove b: the next relist deletes it, and a wait for a status
	// newer than the second relist is answered by the global time with "no
	// such pod".
	if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: idB}); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: idB}); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	relist()
	if st, err := cache.GetNewerThan(ctx, "uid-b", second); st != nil || err != nil {
		t.Fatalf("uid-b after removal: %v, %v; want nil, nil", st, err)
	}
	if st, err := cache.GetNewerThan(ctx, "uid-a", second); err != nil || st.GetId() != idA {
		t.Fatalf("uid-a after third relist: %v, %v", st, err)
	}
}
