package criclient

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// waitForWaiters blocks until n timers are pending on the fake clock.
func waitForWaiters(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond) // polling a condition, not timing behaviour
	}
}

func TestTokenBucketBurstThenRate(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	b := newTokenBucket(clk, 2, 3) // 2 QPS, burst 3
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := b.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- b.wait(ctx) }()
	waitForWaiters(t, clk)
	select {
	case <-done:
		t.Fatal("fourth call admitted with an empty bucket")
	default:
	}
	clk.Step(499 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("admitted before its token was due")
	default:
	}
	clk.Step(2 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestTokenBucketCancelGivesTokenBack(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	b := newTokenBucket(clk, 1, 1)
	if err := b.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.wait(ctx) }()
	waitForWaiters(t, clk)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait = %v, want context.Canceled", err)
	}
	// One second later exactly one token is there: the cancelled waiter's
	// reservation was returned, so the next call does not wait two seconds.
	clk.Step(time.Second)
	if err := b.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if clk.HasWaiters() {
		t.Fatal("timers left behind")
	}
}

func TestTokenBucketDoneContext(t *testing.T) {
	b := newTokenBucket(clocktesting.NewFakeClock(time.Unix(0, 0)), 1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait on a done context = %v", err)
	}
}
