package criclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient"
)

func TestGateBoundsInFlightAndHonoursContext(t *testing.T) {
	g, err := criclient.NewGate(criclient.Limits{MaxInFlight: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	release, err := g.Acquire(context.Background())
	if err != nil {
		t.Fatalf("first Acquire: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with the slot taken and ctx canceled = %v, want context.Canceled", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := g.Acquire(context.Background())
		if err == nil {
			r()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("second Acquire returned (%v) while the only slot was held", err)
	case <-time.After(20 * time.Millisecond): // it is waiting, as it should
	}
	release()
	if err := <-got; err != nil {
		t.Fatalf("second Acquire after release: %v", err)
	}
}

func TestGateRateOnInjectedClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	g, err := criclient.NewGate(criclient.Limits{QPS: 1, Burst: 1}, clk)
	if err != nil {
		t.Fatal(err)
	}
	release, err := g.Acquire(context.Background())
	if err != nil {
		t.Fatalf("first Acquire: %v", err)
	}
	release()
	got := make(chan error, 1)
	go func() {
		r, err := g.Acquire(context.Background())
		if err == nil {
			r()
		}
		got <- err
	}()
	for !clk.HasWaiters() { // the second call waits for a token on the fake clock
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-got:
		t.Fatalf("second Acquire returned (%v) before its token was due", err)
	default:
	}
	clk.Step(time.Second)
	if err := <-got; err != nil {
		t.Fatalf("second Acquire after a second: %v", err)
	}
}
