package admission_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/concurrentstart/admission"
)

func newAIMD(t *testing.T, cfg admission.AIMDConfig) *admission.AIMD {
	t.Helper()
	l, err := admission.NewAIMD(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Fast samples raise the bound by about one per bound's worth of samples,
// up to Max.
func TestAIMDGrowsWhileFast(t *testing.T) {
	l := newAIMD(t, admission.AIMDConfig{Initial: 2, Max: 6})
	for range 4 {
		l.Observe(admission.Sample{Latency: 10 * time.Millisecond})
	}
	if got := l.Limit(); got != 3 {
		t.Fatalf("after 4 fast samples from 2: bound %d, want 3", got)
	}
	for range 100 {
		l.Observe(admission.Sample{Latency: 10 * time.Millisecond})
	}
	if got := l.Limit(); got != 6 {
		t.Fatalf("bound %d, want Max 6", got)
	}
}

// A slow sample (beyond Tolerance x the fastest) or an overload error cuts
// the bound by Backoff, once for a bound's worth of samples, never below
// Min.
func TestAIMDCutsOnCongestion(t *testing.T) {
	l := newAIMD(t, admission.AIMDConfig{Initial: 8, Min: 2, Backoff: 0.5})
	for range 8 {
		l.Observe(admission.Sample{Latency: 10 * time.Millisecond})
	}
	before := l.Limit()
	l.Observe(admission.Sample{Latency: 50 * time.Millisecond})
	if got := l.Limit(); got != before/2 {
		t.Fatalf("after a slow sample: bound %d, want %d", got, before/2)
	}
	l.Observe(admission.Sample{Latency: 50 * time.Millisecond}) // same slowdown: no second cut
	if got := l.Limit(); got != before/2 {
		t.Fatalf("second slow sample of the same window cut again: %d", got)
	}
	for range 20 {
		l.Observe(admission.Sample{Latency: time.Millisecond, Overload: true})
	}
	if got := l.Limit(); got != 2 {
		t.Fatalf("after overloads: bound %d, want Min 2", got)
	}
}

// The controller feeds the limiter each grant's latency and outcome: an
// overload error from the runtime lowers the bound the controller applies.
func TestControllerFeedsLimiter(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	l := newAIMD(t, admission.AIMDConfig{Initial: 4, Backoff: 0.5})
	c := newController(t, admission.WithLimiter(l), admission.WithClock(clk))
	ctx := context.Background()
	var gs []*admission.Grant
	for i := range 4 {
		g, err := c.Acquire(ctx, string(rune('a'+i)), 0)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	clk.Step(100 * time.Millisecond)
	for _, g := range gs[:3] {
		g.Release(nil)
	}
	gs[3].Release(status.Error(codes.DeadlineExceeded, "runtime too slow"))
	if got := c.Stats().Limit; got != 2 {
		t.Fatalf("bound after an overload: %d, want 2", got)
	}
}
