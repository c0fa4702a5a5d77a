package asyncpull_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/asyncpull"
)

// cri-api's interface and fake both fit ImageService.
var (
	_ asyncpull.ImageService = (*critest.FakeImageService)(nil)
	_ asyncpull.ImageService = criapi.ImageManagerService(nil)
)

func pod(i int) types.UID { return types.UID(fmt.Sprintf("pod-%d", i)) }

func TestFakeImageServicePullAndPresent(t *testing.T) {
	fake := critest.NewFakeImageService()
	s := newScheduler(fake, asyncpull.WithQPS(0, 0))
	defer s.Close()
	ctx := context.Background()
	res, err := s.Wait(ctx, asyncpull.Request{Image: "nginx", PodUID: "a"})
	if err != nil || res.State != asyncpull.StatePresent || res.Image != "docker.io/library/nginx:latest" || res.ImageRef == "" {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
	// Present now: IfNotPresent is answered from the record without any runtime call.
	calls := len(fake.Called)
	if res := s.Ensure(ctx, asyncpull.Request{Image: "docker.io/library/nginx", PodUID: "b"}); res.State != asyncpull.StatePresent {
		t.Fatalf("second Ensure = %+v", res)
	}
	if len(fake.Called) != calls {
		t.Fatalf("runtime called for a known-present image: %v", fake.Called[calls:])
	}
	if want := []string{"ImageStatus", "PullImage", "ImageStatus"}; !slices.Equal(fake.Called, want) {
		t.Fatalf("calls = %v, want %v", fake.Called, want)
	}
}

func TestDedupeManyWaitersOneCall(t *testing.T) {
	imgs := newTestImages(true)
	rec := &eventRecorder{}
	s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithObserver(rec.observe))
	defer s.Close()
	ctx := context.Background()
	spellings := []string{"nginx", "docker.io/library/nginx", "docker.io/library/nginx:latest", "library/nginx:latest"}
	const n = 40
	for i := range n {
		res := s.Ensure(ctx, asyncpull.Request{Image: spellings[i%len(spellings)], PodUID: pod(i)})
		if res.State != asyncpull.StateQueued && res.State != asyncpull.StatePulling {
			t.Fatalf("Ensure %d = %+v", i, res)
		}
	}
	c := imgs.nextCall(t)
	// More waiters while the pull runs join it too.
	if res := s.Ensure(ctx, asyncpull.Request{Image: "nginx", PodUID: pod(n)}); res.State != asyncpull.StatePulling {
		t.Fatalf("Ensure during pull = %+v", res)
	}
	c.release(nil)
	for i := range n + 1 {
		res, err := s.Wait(ctx, asyncpull.Request{Image: "nginx", PodUID: pod(i)})
		if err != nil || res.State != asyncpull.StatePresent {
			t.Fatalf("pod %d: %+v %v", i, res, err)
		}
	}
	if got := imgs.pullCount(); got != 1 {
		t.Fatalf("PullImage calls = %d, want 1", got)
	}
	if got := rec.count(asyncpull.EventDedupe); got < n {
		t.Fatalf("dedupe events = %d, want >= %d", got, n)
	}
}

func TestCredentialsSeparatePulls(t *testing.T) {
	authX := &runtimeapi.AuthConfig{Username: "x", Password: "px"}
	authX2 := &runtimeapi.AuthConfig{Username: "x", Password: "px"}
	authY := &runtimeapi.AuthConfig{Username: "y", Password: "py"}
	ctx := context.Background()

	t.Run("separate", func(t *testing.T) {
		imgs := newTestImages(true)
		s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(0))
		defer s.Close()
		for i, a := range []*runtimeapi.AuthConfig{authX, authY, nil, authX2, {}} {
			s.Ensure(ctx, asyncpull.Request{Image: "private/app", Auth: a, PodUID: pod(i)})
		}
		// Hold all three pulls before releasing any: an anonymous pull that completed before
		// another pod's presence check returned would satisfy that pod without a pull.
		got := map[string]bool{}
		var calls []*pullCall
		for range 3 {
			c := imgs.nextCall(t)
			got[c.Auth.GetUsername()] = true
			calls = append(calls, c)
		}
		for _, c := range calls {
			c.release(nil)
		}
		eventually(t, "pulls settle", func() bool {
			return s.Ensure(ctx, asyncpull.Request{Image: "private/app", Auth: authX, PodUID: pod(0)}).State.Done()
		})
		imgs.noCall(t)
		if !got["x"] || !got["y"] || !got[""] {
			t.Fatalf("pulled with %v, want x, y and anonymous", got)
		}
	})

	t.Run("verify other credentials before reuse", func(t *testing.T) {
		imgs := newTestImages(false)
		s := newScheduler(imgs, asyncpull.WithQPS(0, 0))
		defer s.Close()
		if _, err := s.Wait(ctx, asyncpull.Request{Image: "private/app", Auth: authX, PodUID: "a"}); err != nil {
			t.Fatal(err)
		}
		// Pulled with X: a pod with Y must prove its credentials with its own pull.
		imgs.setFail("docker.io/private/app:latest", status.Error(codes.Unauthenticated, "denied"))
		res, err := s.Wait(ctx, asyncpull.Request{Image: "private/app", Auth: authY, PodUID: "b"})
		if !errors.Is(err, asyncpull.ErrUnauthorized) || res.Reason != asyncpull.ReasonErrImagePull {
			t.Fatalf("pod with other credentials: %+v %v", res, err)
		}
		if got := imgs.pullCount(); got != 2 {
			t.Fatalf("PullImage calls = %d, want 2", got)
		}
		// Same credentials as the successful pull: present, no runtime call.
		if res := s.Ensure(ctx, asyncpull.Request{Image: "private/app", Auth: authX2, PodUID: "c"}); res.State != asyncpull.StatePresent {
			t.Fatalf("same credentials: %+v", res)
		}
	})

	t.Run("share", func(t *testing.T) {
		imgs := newTestImages(true)
		s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithCredentialPolicy(asyncpull.ShareCredentials))
		defer s.Close()
		for i, a := range []*runtimeapi.AuthConfig{authX, authY, nil} {
			s.Ensure(ctx, asyncpull.Request{Image: "private/app", Auth: a, PodUID: pod(i)})
		}
		imgs.nextCall(t).release(nil)
		for i := range 3 {
			if res, err := s.Wait(ctx, asyncpull.Request{Image: "private/app", PodUID: pod(i)}); err != nil {
				t.Fatalf("pod %d: %+v %v", i, res, err)
			}
		}
		if got := imgs.pullCount(); got != 1 {
			t.Fatalf("PullImage calls = %d, want 1", got)
		}
	})
}

func TestMaxParallelHolds(t *testing.T) {
	for _, limit := range []int{1, 3} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			imgs := newTestImages(true)
			s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(limit))
			defer s.Close()
			ctx := context.Background()
			const n = 10
			for i := range n {
				s.Ensure(ctx, asyncpull.Request{Image: img(i), PodUID: pod(i), PullPolicy: asyncpull.PullAlways})
			}
			var order []string
			var running []*pullCall
			for len(order) < n {
				for len(running) < limit && len(order)+len(running) < n {
					running = append(running, imgs.nextCall(t))
				}
				imgs.mu.Lock()
				inFlight := imgs.inFlight
				imgs.mu.Unlock()
				if inFlight > limit {
					t.Fatalf("%d pulls in flight, limit %d", inFlight, limit)
				}
				order = append(order, running[0].Image)
				running[0].release(nil)
				running = running[1:]
			}
			for i := range n {
				if res, err := s.Wait(ctx, asyncpull.Request{Image: img(i), PodUID: pod(i), PullPolicy: asyncpull.PullAlways}); err != nil {
					t.Fatalf("%+v %v", res, err)
				}
			}
			if imgs.maxInFlight != limit {
				t.Fatalf("max in flight = %d, want %d", imgs.maxInFlight, limit)
			}
			if limit == 1 {
				want := make([]string, n)
				for i := range n {
					want[i] = img(i)
				}
				if !slices.Equal(order, want) {
					t.Fatalf("serial order = %v, want FIFO %v", order, want)
				}
			}
		})
	}
}

func TestMaxParallelPerRegistryHolds(t *testing.T) {
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(10),
		asyncpull.WithMaxParallelPerRegistry(2), asyncpull.WithRegistryLimit("slow.example", 1))
	defer s.Close()
	ctx := context.Background()
	var reqs []asyncpull.Request
	for i := range 6 {
		reqs = append(reqs, asyncpull.Request{Image: fmt.Sprintf("slow.example/a%d", i), PodUID: pod(i)},
			asyncpull.Request{Image: fmt.Sprintf("fast.example/b%d", i), PodUID: pod(i)})
	}
	for _, r := range reqs {
		s.Ensure(ctx, r)
	}
	for range reqs {
		c := imgs.nextCall(t)
		imgs.mu.Lock()
		slow, fast := imgs.regInFlight["slow.example"], imgs.regInFlight["fast.example"]
		imgs.mu.Unlock()
		if slow > 1 || fast > 2 {
			t.Fatalf("in flight slow=%d fast=%d, limits 1 and 2", slow, fast)
		}
		c.release(nil)
	}
	for _, r := range reqs {
		if _, err := s.Wait(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if imgs.regMax["slow.example"] != 1 || imgs.regMax["fast.example"] > 2 {
		t.Fatalf("max in flight per registry = %v", imgs.regMax)
	}
}

func TestQPSQueuesInsteadOfRejecting(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(false)
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(2, 3), asyncpull.WithMaxParallel(0))
	defer s.Close()
	ctx := context.Background()
	const n = 9
	for i := range n {
		imgs.setPresent() // all absent
		if res := s.Ensure(ctx, asyncpull.Request{Image: img(i), PodUID: pod(i), PullPolicy: asyncpull.PullAlways}); res.State != asyncpull.StateQueued {
			t.Fatalf("Ensure %d = %+v, want Queued (never rejected)", i, res)
		}
	}
	// The burst goes at once; the rest waits for tokens: 2 per second.
	eventually(t, "burst pulled", func() bool { return imgs.pullCount() == 3 })
	for want := 5; want <= n+1; want += 2 {
		eventually(t, "dispatcher waits for a token", clk.HasWaiters)
		if got := imgs.pullCount(); got != want-2 {
			t.Fatalf("before step: %d pulls, want %d", got, want-2)
		}
		clk.Step(time.Second)
		eventually(t, fmt.Sprintf("%d pulls", min(want, n)), func() bool { return imgs.pullCount() == min(want, n) })
	}
	for i := range n {
		if res, err := s.Wait(ctx, asyncpull.Request{Image: img(i), PodUID: pod(i), PullPolicy: asyncpull.PullAlways}); res.State != asyncpull.StatePresent {
			t.Fatalf("pod %d: %+v %v", i, res, err)
		}
	}
}

// startOrder blocks the single slot with a first pull, queues reqs (calling between before each
// one), then releases pulls one at a time and returns the order they reached the runtime.
func startOrder(t *testing.T, s *asyncpull.Scheduler, imgs *testImages, reqs []asyncpull.Request, between func(int)) []string {
	t.Helper()
	ctx := context.Background()
	s.Ensure(ctx, asyncpull.Request{Image: "registry.example/blocker", PodUID: "blocker", PullPolicy: asyncpull.PullAlways})
	blocker := imgs.nextCall(t)
	for i, r := range reqs {
		if between != nil {
			between(i)
		}
		r.PullPolicy = asyncpull.PullAlways
		s.Ensure(ctx, r)
	}
	blocker.release(nil)
	var order []string
	for range reqs {
		c := imgs.nextCall(t)
		order = append(order, c.Image)
		c.release(nil)
	}
	return order
}

func TestPriorityOrderAndAging(t *testing.T) {
	t.Run("priority", func(t *testing.T) {
		imgs := newTestImages(true)
		s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(1), asyncpull.WithQueuePolicy(asyncpull.PriorityPolicy{}))
		defer s.Close()
		reqs := []asyncpull.Request{
			{Image: img(1), PodUID: "p1", Priority: 0},
			{Image: img(2), PodUID: "p2", Priority: 10},
			{Image: img(3), PodUID: "p3", Priority: 5},
			{Image: img(4), PodUID: "p4", Priority: 10},
			{Image: img(5), PodUID: "p5", Priority: 0},
		}
		got := startOrder(t, s, imgs, reqs, nil)
		want := []string{img(2), img(4), img(3), img(1), img(5)}
		if !slices.Equal(got, want) {
			t.Fatalf("order = %v, want %v", got, want)
		}
	})
	t.Run("aging", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		imgs := newTestImages(true)
		s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(1),
			asyncpull.WithQueuePolicy(asyncpull.PriorityPolicy{Aging: 10 * time.Second}))
		defer s.Close()
		reqs := []asyncpull.Request{
			{Image: img(1), PodUID: "old-low", Priority: 0},
			{Image: img(2), PodUID: "new-high", Priority: 5},
			{Image: img(3), PodUID: "new-higher", Priority: 7},
		}
		// The low-priority pull waits 60s (worth 6 levels) before the others arrive.
		got := startOrder(t, s, imgs, reqs, func(i int) {
			if i == 1 {
				clk.Step(60 * time.Second)
			}
		})
		want := []string{img(3), img(1), img(2)}
		if !slices.Equal(got, want) {
			t.Fatalf("order = %v, want %v", got, want)
		}
	})
}

func TestSmallestFirstAndLargeImageLimit(t *testing.T) {
	t.Run("smallest first", func(t *testing.T) {
		imgs := newTestImages(true)
		s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(1), asyncpull.WithQueuePolicy(asyncpull.SmallestFirstPolicy{}))
		defer s.Close()
		reqs := []asyncpull.Request{
			{Image: img(1), PodUID: "a", SizeHint: 300},
			{Image: img(2), PodUID: "b"},
			{Image: img(3), PodUID: "c", SizeHint: 100},
			{Image: img(4), PodUID: "d", SizeHint: 200},
		}
		got := startOrder(t, s, imgs, reqs, nil)
		want := []string{img(3), img(4), img(1), img(2)}
		if !slices.Equal(got, want) {
			t.Fatalf("order = %v, want %v", got, want)
		}
	})
	t.Run("large images hold at most one slot", func(t *testing.T) {
		imgs := newTestImages(true)
		s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(2), asyncpull.WithLargeImageLimit(1<<30, 1))
		defer s.Close()
		ctx := context.Background()
		always := asyncpull.PullAlways
		s.Ensure(ctx, asyncpull.Request{Image: "huge/a", PodUID: "a", SizeHint: 30 << 30, PullPolicy: always})
		s.Ensure(ctx, asyncpull.Request{Image: "huge/b", PodUID: "b", SizeHint: 20 << 30, PullPolicy: always})
		s.Ensure(ctx, asyncpull.Request{Image: "small/c", PodUID: "c", SizeHint: 10 << 20, PullPolicy: always})
		first, second := imgs.nextCall(t), imgs.nextCall(t)
		if first.Image > second.Image { // the two calls race to the runtime
			first, second = second, first
		}
		if first.Image != "docker.io/huge/a:latest" || second.Image != "docker.io/small/c:latest" {
			t.Fatalf("started %s, %s; want huge/a then small/c overtaking huge/b", first.Image, second.Image)
		}
		second.release(nil)
		// A slot is free but huge/b must wait for the large-image slot.
		if res := s.Ensure(ctx, asyncpull.Request{Image: "huge/b", PodUID: "b", PullPolicy: always}); res.State != asyncpull.StateQueued {
			t.Fatalf("huge/b = %+v, want Queued", res)
		}
		first.release(nil)
		imgs.nextCall(t).release(nil)
		if res, err := s.Wait(ctx, asyncpull.Request{Image: "huge/b", PodUID: "b", PullPolicy: always}); err != nil {
			t.Fatalf("%+v %v", res, err)
		}
	})
}

func TestBackOffSequence(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(false)
	rec := &eventRecorder{}
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithObserver(rec.observe))
	defer s.Close()
	ctx := context.Background()
	const image = "registry.example/missing:v1"
	imgs.setFail(image, status.Error(codes.NotFound, "manifest unknown"))
	req := asyncpull.Request{Image: image, PodUID: "p"}

	var got []time.Duration
	for range 7 {
		res, err := s.Wait(ctx, req)
		var pe *asyncpull.PullError
		if res.State != asyncpull.StateFailed || res.Reason != asyncpull.ReasonErrImagePull ||
			!errors.Is(err, asyncpull.ErrNotFound) || !errors.As(err, &pe) || status.Code(pe.Err) != codes.NotFound {
			t.Fatalf("Wait = %+v, %v", res, err)
		}
		res = s.Ensure(ctx, req)
		if res.State != asyncpull.StateBackOff || res.Reason != asyncpull.ReasonImagePullBackOff || !errors.Is(res.Err, asyncpull.ErrNotFound) {
			t.Fatalf("Ensure in back-off = %+v", res)
		}
		d := res.BackOffUntil.Sub(clk.Now())
		got = append(got, d)
		clk.Step(d - time.Second)
		if res := s.Ensure(ctx, req); res.State != asyncpull.StateBackOff {
			t.Fatalf("1s before expiry: %+v", res)
		}
		clk.Step(time.Second)
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("back-off = %v, want %v", got, want)
	}
	if n := imgs.pullCount(); n != 7 {
		t.Fatalf("PullImage calls = %d, want 7 (none during back-off)", n)
	}
	// The observer runs outside the lock, after the failure is delivered: wait for the last one.
	eventually(t, "seven back-off events", func() bool { return rec.count(asyncpull.EventBackOff) >= 7 })
	if n := rec.count(asyncpull.EventBackOff); n != 7 {
		t.Fatalf("back-off events = %d", n)
	}
	// Success resets.
	imgs.setFail(image, nil)
	if _, err := s.Wait(ctx, asyncpull.Request{Image: image, PodUID: "p", PullPolicy: asyncpull.PullAlways}); err != nil {
		t.Fatal(err)
	}
	imgs.setFail(image, status.Error(codes.Unavailable, "registry down"))
	res, err := s.Wait(ctx, asyncpull.Request{Image: image, PodUID: "p", PullPolicy: asyncpull.PullAlways})
	if !errors.Is(err, asyncpull.ErrRegistryUnavailable) || res.Reason != asyncpull.ReasonRegistryUnavailable {
		t.Fatalf("after reset: %+v %v", res, err)
	}
	// The image is present (an IfNotPresent request is satisfied); Always meets the back-off.
	if res := s.Ensure(ctx, req); res.State != asyncpull.StatePresent {
		t.Fatalf("IfNotPresent after a failed Always pull of a present image: %+v", res)
	}
	if res := s.Ensure(ctx, asyncpull.Request{Image: image, PodUID: "p", PullPolicy: asyncpull.PullAlways}); res.BackOffUntil.Sub(clk.Now()) != 10*time.Second {
		t.Fatalf("back-off after success = %v, want 10s", res.BackOffUntil.Sub(clk.Now()))
	}
	// Back-off is per (image, credentials): other credentials are not held back.
	other := asyncpull.Request{Image: image, PodUID: "q", Auth: &runtimeapi.AuthConfig{Username: "u", Password: "p"}}
	if res := s.Ensure(ctx, other); res.State == asyncpull.StateBackOff {
		t.Fatalf("other credentials in back-off: %+v", res)
	}
	_, _ = s.Wait(ctx, other)
}

func TestCancelQueuedPull(t *testing.T) {
	imgs := newTestImages(true)
	rec := &eventRecorder{}
	s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(1), asyncpull.WithObserver(rec.observe))
	defer s.Close()
	bg := context.Background()
	s.Ensure(bg, asyncpull.Request{Image: img(0), PodUID: "running"})
	blocker := imgs.nextCall(t)

	// Queued for two pods: one context is cancelled, the other pod is deleted.
	ctxA, cancelA := context.WithCancel(bg)
	s.Ensure(ctxA, asyncpull.Request{Image: img(1), PodUID: "a"})
	s.Ensure(bg, asyncpull.Request{Image: img(1), PodUID: "b"})
	// Queued for one pod via Cancel.
	s.Ensure(bg, asyncpull.Request{Image: img(2), PodUID: "c"})
	cancelA()
	s.Cancel("c")
	eventually(t, "img2 dropped", func() bool { return rec.count(asyncpull.EventCanceled) == 1 })
	if res := s.Ensure(bg, asyncpull.Request{Image: img(1), PodUID: "b"}); res.State != asyncpull.StateQueued {
		t.Fatalf("img1 still has a waiter: %+v", res)
	}
	s.Cancel("b")
	eventually(t, "img1 dropped", func() bool { return rec.count(asyncpull.EventCanceled) == 2 })
	blocker.release(nil)
	if _, err := s.Wait(bg, asyncpull.Request{Image: img(0), PodUID: "running"}); err != nil {
		t.Fatal(err)
	}
	imgs.noCall(t)
	if got := imgs.pulled(); !slices.Equal(got, []string{img(0)}) {
		t.Fatalf("pulled %v, want only %s", got, img(0))
	}
}

func TestCancelRunningPull(t *testing.T) {
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithQPS(0, 0))
	defer s.Close()
	bg := context.Background()
	ctxA, cancelA := context.WithCancel(bg)
	defer cancelA()
	s.Ensure(ctxA, asyncpull.Request{Image: img(1), PodUID: "a"})
	s.Ensure(bg, asyncpull.Request{Image: img(1), PodUID: "b"})
	c := imgs.nextCall(t)
	s.Cancel("b") // "a" still waits
	select {
	case <-c.ctx.Done():
		t.Fatal("pull cancelled while a pod still waits")
	default:
	}
	cancelA()
	select {
	case <-c.ctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("PullImage context not cancelled after the last waiter left")
	}
	// A new request starts a fresh pull rather than joining the cancelled one.
	s.Ensure(bg, asyncpull.Request{Image: img(1), PodUID: "d"})
	c2 := imgs.nextCall(t)
	c2.release(nil)
	if res, err := s.Wait(bg, asyncpull.Request{Image: img(1), PodUID: "d"}); err != nil {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestWaitContextCancelled(t *testing.T) {
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithQPS(0, 0))
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Wait(ctx, asyncpull.Request{Image: img(1)})
		done <- err
	}()
	c := imgs.nextCall(t)
	cancel()
	if err := <-done; !errors.Is(err, asyncpull.ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait err = %v", err)
	}
	<-c.ctx.Done() // the anonymous waiter was the only one: the pull is cancelled
}

func TestCloseWithPullsInFlight(t *testing.T) {
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(3), asyncpull.WithNotify(func(types.UID) {}))
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Wait(ctx, asyncpull.Request{Image: img(i), PodUID: pod(i)})
			errs <- err
		}()
	}
	var calls []*pullCall
	for range 3 {
		calls = append(calls, imgs.nextCall(t))
	}
	eventually(t, "all queued", func() bool {
		n := 0
		for i := range 8 {
			if st := s.Ensure(ctx, asyncpull.Request{Image: img(i), PodUID: "probe"}).State; st == asyncpull.StateQueued || st == asyncpull.StatePulling {
				n++
			}
		}
		return n == 8
	})
	s.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, asyncpull.ErrClosed) {
			t.Fatalf("Wait after Close: %v", err)
		}
	}
	for _, c := range calls {
		if c.ctx.Err() == nil {
			t.Fatal("in-flight PullImage not cancelled by Close")
		}
	}
	if res := s.Ensure(ctx, asyncpull.Request{Image: img(1), PodUID: "x"}); !errors.Is(res.Err, asyncpull.ErrClosed) {
		t.Fatalf("Ensure after Close = %+v", res)
	}
	if _, err := s.Wait(ctx, asyncpull.Request{Image: img(1)}); !errors.Is(err, asyncpull.ErrClosed) {
		t.Fatalf("Wait after Close = %v", err)
	}
	s.Close() // idempotent
}

func TestNotifyNeverLostUnderSlowConsumer(t *testing.T) {
	imgs := newTestImages(false)
	gate := make(chan struct{})
	var mu sync.Mutex
	notified := map[types.UID]int{}
	var first sync.Once
	s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(0), asyncpull.WithNotify(func(p types.UID) {
		first.Do(func() { <-gate }) // the consumer stalls on its first wake-up
		mu.Lock()
		notified[p]++
		mu.Unlock()
	}))
	defer s.Close()
	ctx := context.Background()
	const pods, perPod = 50, 3
	for p := range pods {
		for i := range perPod {
			s.Ensure(ctx, asyncpull.Request{Image: img(p*perPod + i), PodUID: pod(p)})
		}
	}
	// The scheduler keeps going while the consumer is stuck.
	eventually(t, "all pulls done while the consumer is blocked", func() bool { return imgs.pullCount() == pods*perPod })
	close(gate)
	eventually(t, "every pod notified", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(notified) == pods
	})
	for p := range pods {
		for i := range perPod {
			if res := s.Ensure(ctx, asyncpull.Request{Image: img(p*perPod + i), PodUID: pod(p)}); res.State != asyncpull.StatePresent {
				t.Fatalf("pod %d image %d: %+v", p, i, res)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for p, n := range notified {
		if n > perPod {
			t.Fatalf("pod %s notified %d times for %d results: not coalesced", p, n, perPod)
		}
	}
}

func TestSubscriptionCoalescesAndIsNotLost(t *testing.T) {
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithQPS(0, 0))
	defer s.Close()
	ctx := context.Background()
	sub := mustSub(s.Subscribe("p"))
	defer sub.Close()
	for i := range 3 {
		s.Ensure(ctx, asyncpull.Request{Image: img(i), PodUID: "p"})
	}
	for range 3 {
		imgs.nextCall(t).release(nil) // nobody reads C meanwhile: sends must not block
	}
	select {
	case <-sub.Events():
	case <-time.After(20 * time.Second):
		t.Fatal("no wake-up")
	}
	eventually(t, "all three present", func() bool {
		present := 0
		for i := range 3 {
			if s.Ensure(ctx, asyncpull.Request{Image: img(i), PodUID: "p"}).State == asyncpull.StatePresent {
				present++
			}
		}
		return present == 3
	})
	// A subscription made after the result is ready is signalled at once.
	s.Ensure(ctx, asyncpull.Request{Image: img(9), PodUID: "late"})
	imgs.nextCall(t).release(nil)
	eventually(t, "late result ready", func() bool {
		sub2 := mustSub(s.Subscribe("late"))
		defer sub2.Close()
		select {
		case <-sub2.Events():
			return true
		default:
			return false
		}
	})
}

func TestBadInputTypedErrors(t *testing.T) {
	fake := critest.NewFakeImageService()
	s := newScheduler(fake)
	defer s.Close()
	ctx := context.Background()
	for _, image := range []string{"", " nginx", "Nginx", "a b", ":tag", "nginx@sha256:bad", "nginx:bad:tag", "-x"} {
		res := s.Ensure(ctx, asyncpull.Request{Image: image, PodUID: "p"})
		var re *asyncpull.RequestError
		if res.State != asyncpull.StateFailed || res.Reason != asyncpull.ReasonInvalidImageName ||
			!errors.Is(res.Err, asyncpull.ErrInvalidImageName) || !errors.As(res.Err, &re) || re.Field != "Image" {
			t.Errorf("Ensure(%q) = %+v", image, res)
		}
		if _, err := s.Wait(ctx, asyncpull.Request{Image: image}); !errors.Is(err, asyncpull.ErrInvalidImageName) {
			t.Errorf("Wait(%q) err = %v", image, err)
		}
	}
	for _, req := range []asyncpull.Request{
		{Image: "nginx", PullPolicy: "Sometimes"},
		{Image: "nginx", SizeHint: -1},
	} {
		if res := s.Ensure(ctx, req); res.State != asyncpull.StateFailed || !errors.Is(res.Err, asyncpull.ErrInvalidRequest) {
			t.Errorf("Ensure(%v) = %+v", req, res)
		}
	}
	var nilCtx context.Context
	var ae *asyncpull.ArgError
	if res := s.Ensure(nilCtx, asyncpull.Request{Image: "bad name"}); !errors.As(res.Err, &ae) || ae.Arg != "ctx" || res.Reason != "" {
		t.Errorf("nil ctx: %+v, want an *ArgError for ctx", res)
	}
	if len(fake.Called) != 0 {
		t.Fatalf("runtime called for bad input: %v", fake.Called)
	}
	var ce *asyncpull.ConfigError
	if _, err := asyncpull.New(nil); !errors.As(err, &ce) || ce.Option != "images" {
		t.Fatalf("New(nil) = %v, want a *ConfigError for images", err)
	}
}

func TestPullPolicies(t *testing.T) {
	ctx := context.Background()
	t.Run("never", func(t *testing.T) {
		fake := critest.NewFakeImageService()
		fake.SetFakeImages([]string{"docker.io/library/busybox:latest"})
		s := newScheduler(fake)
		defer s.Close()
		if res, err := s.Wait(ctx, asyncpull.Request{Image: "busybox", PullPolicy: asyncpull.PullNever, PodUID: "p"}); err != nil || res.State != asyncpull.StatePresent {
			t.Fatalf("present: %+v %v", res, err)
		}
		res, err := s.Wait(ctx, asyncpull.Request{Image: "nginx", PullPolicy: asyncpull.PullNever, PodUID: "p"})
		if res.Reason != asyncpull.ReasonErrImageNeverPull || !errors.Is(err, asyncpull.ErrNeverPull) {
			t.Fatalf("absent: %+v %v", res, err)
		}
		if slices.Contains(fake.Called, "PullImage") {
			t.Fatalf("Never pulled: %v", fake.Called)
		}
	})
	t.Run("always", func(t *testing.T) {
		imgs := newTestImages(false)
		imgs.setPresent("docker.io/library/nginx:latest")
		s := newScheduler(imgs, asyncpull.WithQPS(0, 0))
		defer s.Close()
		req := asyncpull.Request{Image: "nginx", PullPolicy: asyncpull.PullAlways, PodUID: "p"}
		for range 2 {
			if res, err := s.Wait(ctx, req); err != nil || res.State != asyncpull.StatePresent {
				t.Fatalf("%+v %v", res, err)
			}
		}
		if n := imgs.pullCount(); n != 2 {
			t.Fatalf("Always: %d pulls, want 2 (present image pulled anyway, once per request)", n)
		}
	})
	t.Run("always joins an inspect", func(t *testing.T) {
		imgs := newTestImages(false)
		imgs.setPresent("docker.io/library/nginx:latest")
		s := newScheduler(imgs, asyncpull.WithQPS(0, 0))
		defer s.Close()
		s.Ensure(ctx, asyncpull.Request{Image: "nginx", PodUID: "a"})
		res, err := s.Wait(ctx, asyncpull.Request{Image: "nginx", PullPolicy: asyncpull.PullAlways, PodUID: "b"})
		if err != nil || res.State != asyncpull.StatePresent {
			t.Fatalf("%+v %v", res, err)
		}
		if n := imgs.pullCount(); n > 1 {
			t.Fatalf("%d pulls", n)
		}
	})
	t.Run("inspect error", func(t *testing.T) {
		fake := critest.NewFakeImageService()
		fake.InjectError("ImageStatus", status.Error(codes.Internal, "store broken"))
		s := newScheduler(fake)
		defer s.Close()
		res, err := s.Wait(ctx, asyncpull.Request{Image: "nginx", PodUID: "p"})
		if res.Reason != asyncpull.ReasonImageInspectError || !errors.Is(err, asyncpull.ErrInspect) || res.State != asyncpull.StateFailed || status.Code(err) != codes.Internal {
			t.Fatalf("%+v %v", res, err)
		}
	})
}

func TestErrorClassification(t *testing.T) {
	cases := []struct {
		err  error
		want error
	}{
		{status.Error(codes.NotFound, "x"), asyncpull.ErrNotFound},
		{status.Error(codes.Unauthenticated, "x"), asyncpull.ErrUnauthorized},
		{status.Error(codes.PermissionDenied, "x"), asyncpull.ErrUnauthorized},
		{status.Error(codes.Unavailable, "x"), asyncpull.ErrRegistryUnavailable},
		{status.Error(codes.ResourceExhausted, "x"), asyncpull.ErrRegistryUnavailable},
		{status.Error(codes.DeadlineExceeded, "x"), asyncpull.ErrTimeout},
		{status.Error(codes.Canceled, "x"), asyncpull.ErrCanceled},
		{context.DeadlineExceeded, asyncpull.ErrTimeout},
		{status.Error(codes.Unknown, `failed to resolve reference "r/x:1": r/x:1: not found`), asyncpull.ErrNotFound},
		{status.Error(codes.Unknown, "pull access denied, repository does not exist or may require authorization"), asyncpull.ErrUnauthorized},
		{status.Error(codes.Unknown, "unexpected status: 401 Unauthorized"), asyncpull.ErrUnauthorized},
		{status.Error(codes.Unknown, "dial tcp: lookup r.example: no such host"), asyncpull.ErrRegistryUnavailable},
		{status.Error(codes.Unknown, "read tcp: i/o timeout"), asyncpull.ErrTimeout},
		{errors.New("disk full"), asyncpull.ErrPullFailed},
	}
	for _, c := range cases {
		imgs := newTestImages(false)
		imgs.setFail("registry.example/x:v1", c.err)
		s := newScheduler(imgs, asyncpull.WithQPS(0, 0))
		_, err := s.Wait(context.Background(), asyncpull.Request{Image: "registry.example/x:v1"})
		s.Close()
		var pe *asyncpull.PullError
		if !errors.Is(err, c.want) || !errors.Is(err, c.err) || !errors.As(err, &pe) || pe.Class != c.want {
			t.Errorf("%v: got %v, want class %v wrapping the cause", c.err, err, c.want)
		}
	}
}

func TestPullTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithPullTimeout(time.Minute))
	defer s.Close()
	ctx := context.Background()
	s.Ensure(ctx, asyncpull.Request{Image: img(1), PodUID: "p"})
	c := imgs.nextCall(t)
	eventually(t, "deadline timer armed", clk.HasWaiters)
	clk.Step(59 * time.Second)
	select {
	case <-c.ctx.Done():
		t.Fatal("cancelled before the deadline")
	default:
	}
	clk.Step(time.Second)
	res, err := s.Wait(ctx, asyncpull.Request{Image: img(1), PodUID: "p"})
	if !errors.Is(err, asyncpull.ErrTimeout) || res.Reason != asyncpull.ReasonErrImagePull {
		t.Fatalf("%+v %v", res, err)
	}
	if res := s.Ensure(ctx, asyncpull.Request{Image: img(1), PodUID: "p"}); res.State != asyncpull.StateBackOff {
		t.Fatalf("timeout not backed off: %+v", res)
	}
}

func TestObserverEvents(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(true)
	rec := &eventRecorder{}
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(1), asyncpull.WithObserver(rec.observe))
	defer s.Close()
	ctx := context.Background()
	s.Ensure(ctx, asyncpull.Request{Image: img(1), PodUID: "a", PullPolicy: asyncpull.PullAlways})
	s.Ensure(ctx, asyncpull.Request{Image: img(2), PodUID: "b", PullPolicy: asyncpull.PullAlways})
	s.Ensure(ctx, asyncpull.Request{Image: img(2), PodUID: "c", PullPolicy: asyncpull.PullAlways})
	c1 := imgs.nextCall(t)
	clk.Step(7 * time.Second)
	c1.release(nil)
	c2 := imgs.nextCall(t)
	clk.Step(3 * time.Second)
	c2.release(nil)
	eventually(t, "events", func() bool { return rec.count(asyncpull.EventPullFinished) == 2 })
	if _, err := s.Wait(ctx, asyncpull.Request{Image: img(2), PodUID: "b", PullPolicy: asyncpull.PullAlways}); err != nil {
		t.Fatal(err)
	}
	started := rec.of(asyncpull.EventPullStarted)
	// Each pull's goroutine calls the observer after releasing the lock, so the two
	// PullFinished events may arrive in either order: match them by image.
	fin := map[string]asyncpull.Event{}
	for _, e := range rec.of(asyncpull.EventPullFinished) {
		fin[e.Image] = e
	}
	if rec.count(asyncpull.EventDedupe) != 1 || rec.count(asyncpull.EventQueued) != 2 ||
		started[1].QueueWait != 7*time.Second || started[1].Waiters != 2 ||
		fin[img(1)].Duration != 7*time.Second || fin[img(2)].Duration != 3*time.Second || fin[img(2)].Size != 1000 {
		t.Fatalf("events: %+v", rec.all())
	}
}

func TestGoroutinesStopOnClose(t *testing.T) {
	// goleak (TestMain) checks that nothing outlives the tests; this exercises the paths that
	// start goroutines (inspect, pull, context watchers, notifier) and closes at each stage.
	for stage := range 3 {
		imgs := newTestImages(true)
		s := newScheduler(imgs, asyncpull.WithNotify(func(types.UID) {}))
		ctx, cancel := context.WithCancel(context.Background())
		s.Ensure(ctx, asyncpull.Request{Image: img(1), PodUID: "a"})
		if stage > 0 {
			c := imgs.nextCall(t)
			if stage > 1 {
				c.release(nil)
				_, _ = s.Wait(ctx, asyncpull.Request{Image: img(1), PodUID: "a"})
			}
		}
		s.Close()
		cancel()
	}
}
