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

func observe(l *admission.AIMD, n int, d time.Duration) {
	for range n {
		l.Observe(admission.Sample{Latency: d})
	}
}

// Fast windows double the bound until the first congestion (slow start),
// then raise it by one each, up to Max.
func TestAIMDGrowsWhileFast(t *testing.T) {
	l := newAIMD(t, admission.AIMDConfig{Initial: 2, Max: 40})
	observe(l, 16, 10*time.Millisecond)
	if got := l.Limit(); got != 8 {
		t.Fatalf("after two fast windows from 2: bound %d, want 8 (doubling)", got)
	}
	observe(l, 8, 50*time.Millisecond) // congestion: cut, slow start over
	if got := l.Limit(); got != 6 {
		t.Fatalf("after a slow window: bound %d, want 6", got)
	}
	observe(l, 8, 10*time.Millisecond)
	if got := l.Limit(); got != 7 {
		t.Fatalf("after a fast window past slow start: bound %d, want 7", got)
	}
	observe(l, 800, 10*time.Millisecond)
	if got := l.Limit(); got != 40 {
		t.Fatalf("bound %d, want Max 40", got)
	}
}

// A window whose mean is beyond Tolerance x the uncongested mean cuts the
// bound by Backoff, once per bound's worth of samples; one slow call in a
// window does not. Overload errors cut too; never below Min.
func TestAIMDCutsOnCongestion(t *testing.T) {
	l := newAIMD(t, admission.AIMDConfig{Initial: 8, Min: 2, Max: 8, Backoff: 0.5})
	observe(l, 8, 10*time.Millisecond)
	for i := range 8 { // one outlier: mean 13.75 ms, not congestion
		d := 10 * time.Millisecond
		if i == 3 {
			d = 40 * time.Millisecond
		}
		l.Observe(admission.Sample{Latency: d})
	}
	if got := l.Limit(); got != 8 {
		t.Fatalf("a single slow call cut the bound: %d, want 8", got)
	}
	observe(l, 8, 50*time.Millisecond)
	if got := l.Limit(); got != 4 {
		t.Fatalf("after a slow window: %d, want 4", got)
	}
	observe(l, 8, 50*time.Millisecond)
	if got := l.Limit(); got != 2 {
		t.Fatalf("after a second slow window: %d, want 2", got)
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
		g, err := c.Acquire(ctx, admission.Request{Pod: string(rune('a' + i))})
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

// Kinds are compared with themselves: a start four times slower than a
// create is not congestion.
func TestAIMDComparesKindsApart(t *testing.T) {
	l := newAIMD(t, admission.AIMDConfig{Initial: 4})
	for range 40 {
		l.Observe(admission.Sample{Kind: "CreateContainer", Latency: 10 * time.Millisecond})
		l.Observe(admission.Sample{Kind: "StartContainer", Latency: 40 * time.Millisecond})
	}
	if got := l.Limit(); got <= 4 {
		t.Fatalf("bound %d after uncongested mixed samples, want it grown above 4", got)
	}
}
