package asyncpull

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	critest "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestBackOffEntriesGarbageCollected(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	fake := critest.NewFakeImageService()
	s, err := New(fake, WithClock(clk), WithQPS(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := range 3 {
		fake.InjectError("PullImage", status.Error(codes.NotFound, "gone"))
		if _, err := s.Wait(ctx, Request{Image: "registry.example/x:" + string(rune('a'+i)), PodUID: "p"}); err == nil {
			t.Fatal("expected failure")
		}
	}
	s.mu.Lock()
	n, pending := len(s.backoff), len(s.pending)
	s.mu.Unlock()
	if n != 3 || pending != 0 {
		t.Fatalf("backoff entries %d, pending %d; want 3, 0", n, pending)
	}
	clk.Step(2*DefaultBackOffMax + time.Second)
	s.Ensure(ctx, Request{Image: "registry.example/other", PodUID: "q"}) // any call runs the GC
	s.mu.Lock()
	n = len(s.backoff)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d back-off entries survived GC", n)
	}
}
