package asyncpull_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/asyncpull"
)

func TestWithBackOffCustom(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(false)
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithBackOff(time.Second, 4*time.Second))
	defer s.Close()
	ctx := context.Background()
	imgs.setFail(img(1), status.Error(codes.Unavailable, "down"))
	req := asyncpull.Request{Image: img(1), PodUID: "p"}
	var got []time.Duration
	for range 4 {
		_, _ = s.Wait(ctx, req)
		d := s.Ensure(ctx, req).BackOffUntil.Sub(clk.Now())
		got = append(got, d)
		clk.Step(d)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("back-off = %v, want %v", got, want)
	}
}

func TestWithPresentTTLRechecksRuntime(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(false)
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithPresentTTL(time.Minute))
	defer s.Close()
	ctx := context.Background()
	req := asyncpull.Request{Image: img(1), PodUID: "p"}
	if _, err := s.Wait(ctx, req); err != nil {
		t.Fatal(err)
	}
	imgs.mu.Lock()
	delete(imgs.present, img(1)) // image garbage-collected behind the scheduler's back
	statusCalls := imgs.statusCalls
	imgs.mu.Unlock()
	if res := s.Ensure(ctx, req); res.State != asyncpull.StatePresent {
		t.Fatalf("within TTL: %+v", res)
	}
	clk.Step(time.Minute)
	if res, err := s.Wait(ctx, req); err != nil || res.State != asyncpull.StatePresent {
		t.Fatalf("after TTL: %+v %v", res, err)
	}
	imgs.mu.Lock()
	defer imgs.mu.Unlock()
	if imgs.statusCalls == statusCalls || len(imgs.pulls) != 2 {
		t.Fatalf("after TTL: ImageStatus calls %d -> %d, pulls %d; want a new check and a re-pull", statusCalls, imgs.statusCalls, len(imgs.pulls))
	}
}

func TestSmallestFirstMaxWaitPreventsStarvation(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(1),
		asyncpull.WithQueuePolicy(asyncpull.SmallestFirstPolicy{MaxWait: time.Minute}))
	defer s.Close()
	reqs := []asyncpull.Request{
		{Image: img(1), PodUID: "big", SizeHint: 1 << 30},
		{Image: img(2), PodUID: "unknown"},
		{Image: img(3), PodUID: "small", SizeHint: 1 << 20},
		{Image: img(4), PodUID: "smaller", SizeHint: 1 << 10},
	}
	// big and unknown have waited 2 minutes when the small ones arrive: they go first, FIFO.
	got := startOrder(t, s, imgs, reqs, func(i int) {
		if i == 2 {
			clk.Step(2 * time.Minute)
		}
	})
	if want := []string{img(1), img(2), img(4), img(3)}; !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
}

func TestStringers(t *testing.T) {
	for st, want := range map[asyncpull.State]string{asyncpull.StateQueued: "Queued", asyncpull.StatePulling: "Pulling",
		asyncpull.StatePresent: "Present", asyncpull.StateBackOff: "BackOff", asyncpull.StateFailed: "Failed", 0: "State(0)"} {
		if st.String() != want {
			t.Errorf("%d.String() = %q", int(st), st.String())
		}
	}
	for k := asyncpull.EventDedupe; k <= asyncpull.EventPresent; k++ {
		if k.String() == "Unknown" {
			t.Errorf("EventKind %d has no name", int(k))
		}
	}
}
