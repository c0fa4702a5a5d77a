package asyncpull_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/internal/testnode"
)

// 20 pods x 5 images arrive at once on a real containerd; the loopback registry's own request
// counts prove every layer (and config) was fetched exactly once.
func TestRealNodeBurstFetchesEachLayerOnce(t *testing.T) {
	n := testnode.Start(t)
	var images []string
	for i := range 5 {
		images = append(images, n.PushImage(t, fmt.Sprintf("burst/app%d", i), testnode.WithSize(int64(1+i)<<20), testnode.WithLayers(3)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := criclient.Dial(ctx, n.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	n.ResetRegistryCounts()

	rec := &eventRecorder{}
	s := newScheduler(c, asyncpull.WithMaxParallel(3), asyncpull.WithObserver(rec.observe))
	defer s.Close()
	var wg sync.WaitGroup
	for p := range 20 {
		uid := fmt.Sprintf("burst-%d", p)
		sb := n.SandboxConfig(fmt.Sprintf("burst-%d", p), uid)
		for _, image := range images {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.Wait(ctx, asyncpull.Request{Image: image, PodUID: asyncpullUID(uid), PodSandboxConfig: sb})
				if err != nil || res.State != asyncpull.StatePresent || res.ImageRef == "" {
					t.Errorf("pod %s image %s: %+v %v", uid, image, res, err)
				}
			}()
		}
	}
	wg.Wait()
	if got := rec.count(asyncpull.EventPullStarted); got != len(images) {
		t.Fatalf("PullImage calls = %d, want %d", got, len(images))
	}
	fetches := n.BlobFetches()
	if len(fetches) < len(images)*3 {
		t.Fatalf("registry saw %d blobs, want at least %d: %v", len(fetches), len(images)*3, fetches)
	}
	for digest, count := range fetches {
		if count != 1 {
			t.Errorf("blob %s fetched %d times, want 1", digest, count)
		}
	}
}
