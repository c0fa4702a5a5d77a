package asyncpull_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
)

// The real client fits ImageService.
var _ asyncpull.ImageService = (*criclient.Client)(nil)

// startSim serves a simulated runtime over gRPC and dials it with criclient.
func startSim(tb testing.TB, opts ...crisim.Option) (*crisim.Runtime, *criclient.Client) {
	tb.Helper()
	srv, err := crisim.Start(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := criclient.Dial(context.Background(), srv.Endpoint())
	if err != nil {
		_ = srv.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = c.Close()
		_ = srv.Close()
	})
	return srv.Runtime(), c
}

func TestSimDedupeOneDownload(t *testing.T) {
	rt, c := startSim(t, crisim.WithRegistryImage("nginx:1.27", 8<<20), crisim.WithPullBandwidth(64<<20))
	s := newScheduler(c)
	defer s.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Wait(ctx, asyncpull.Request{Image: []string{"nginx:1.27", "docker.io/library/nginx:1.27"}[i%2], PodUID: pod(i)})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, d := rt.Calls("PullImage"), rt.Downloads("nginx:1.27"); n != 1 || d != 1 {
		t.Fatalf("PullImage calls %d, downloads %d; want 1 and 1", n, d)
	}
}

func TestSimLimitsHold(t *testing.T) {
	var opts []crisim.Option
	for i := range 12 {
		opts = append(opts, crisim.WithRegistryImage(fmt.Sprintf("registry.example/app%d:v1", i), 2<<20))
	}
	rt, c := startSim(t, append(opts, crisim.WithPullBandwidth(64<<20))...)
	s := newScheduler(c, asyncpull.WithMaxParallel(2), asyncpull.WithQPS(0, 0))
	defer s.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Wait(ctx, asyncpull.Request{Image: img(i), PodUID: pod(i)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if m := rt.MaxInFlight("PullImage"); m > 2 || m < 1 {
		t.Fatalf("max PullImage in flight = %d, limit 2", m)
	}
	if n := rt.Calls("PullImage"); n != 12 {
		t.Fatalf("PullImage calls = %d", n)
	}
}

func TestSimCancelHungPull(t *testing.T) {
	rt, c := startSim(t, crisim.WithRegistryImage("busybox:1.36", 1<<20))
	rt.HangNext("PullImage", 1)
	s := newScheduler(c)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	s.Ensure(ctx, asyncpull.Request{Image: "busybox:1.36", PodUID: "deleted"})
	eventually(t, "pull reaches the runtime", func() bool { return rt.InFlight("PullImage") == 1 })
	cancel() // the only waiter is gone
	eventually(t, "hung pull cancelled", func() bool { return rt.InFlight("PullImage") == 0 })
	if res, err := s.Wait(context.Background(), asyncpull.Request{Image: "busybox:1.36", PodUID: "new"}); err != nil || res.State != asyncpull.StatePresent {
		t.Fatalf("fresh request after cancel: %+v %v", res, err)
	}
}

func TestSimErrorsClassified(t *testing.T) {
	rt, c := startSim(t, crisim.WithRegistryImage("private/app:v1", 1<<20))
	s := newScheduler(c)
	defer s.Close()
	ctx := context.Background()
	_, err := s.Wait(ctx, asyncpull.Request{Image: "missing/app:v1", PodUID: "a"})
	var pe *asyncpull.PullError
	if !errors.Is(err, asyncpull.ErrNotFound) || !errors.As(err, &pe) || status.Code(pe.Err) != codes.NotFound {
		t.Fatalf("missing image: %v", err)
	}
	rt.FailNext("PullImage", 1, status.Error(codes.Unauthenticated, "bad credentials"))
	res, err := s.Wait(ctx, asyncpull.Request{Image: "private/app:v1", PodUID: "b", Auth: &runtimeapi.AuthConfig{Username: "u", Password: "wrong"}})
	if !errors.Is(err, asyncpull.ErrUnauthorized) || res.Reason != asyncpull.ReasonErrImagePull {
		t.Fatalf("unauthorized: %+v %v", res, err)
	}
}
