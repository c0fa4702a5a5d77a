package admission_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
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

// observe feeds n samples of latency d, each granted under the bound the
// limiter has when it is fed, with that many grants in flight.
func observe(l *admission.AIMD, n int, d time.Duration) {
	for range n {
		b := l.Limit()
		l.Observe(admission.Sample{Latency: d, InFlight: b, Bound: b})
	}
}

// The zero AIMDConfig starts at the documented first bound, clamped into
// [Min, Max] when only those are set.
func TestAIMDDefaultInitial(t *testing.T) {
	for _, tc := range []struct {
		cfg  admission.AIMDConfig
		want int
	}{
		{admission.AIMDConfig{}, 6},
		{admission.AIMDConfig{Max: 3}, 3},
		{admission.AIMDConfig{Min: 10}, 10},
	} {
		if got := newAIMD(t, tc.cfg).Limit(); got != tc.want {
			t.Errorf("%+v: first bound %d, want %d", tc.cfg, got, tc.want)
		}
	}
}

// Slow start doubles the bound once a round trip (a bound's worth of fast
// samples); after the first congestion, each fast window of eight raises
// it by one, up to Max.
func TestAIMDGrowsWhileFast(t *testing.T) {
	l := newAIMD(t, admission.AIMDConfig{Initial: 2, Max: 40})
	observe(l, 2, 10*time.Millisecond)
	if got := l.Limit(); got != 4 {
		t.Fatalf("after one round trip from 2: bound %d, want 4", got)
	}
	observe(l, 4, 10*time.Millisecond)
	if got := l.Limit(); got != 8 {
		t.Fatalf("after a second round trip: bound %d, want 8", got)
	}
	observe(l, 8, 50*time.Millisecond) // congestion: cut, slow start over
	if got := l.Limit(); got != 6 {
		t.Fatalf("after a slow window: bound %d, want 6", got)
	}
	observe(l, 7, 10*time.Millisecond)
	if got := l.Limit(); got != 6 {
		t.Fatalf("past slow start, a bound moved before a full window: %d, want 6", got)
	}
	observe(l, 1, 10*time.Millisecond)
	if got := l.Limit(); got != 7 {
		t.Fatalf("after a fast window past slow start: bound %d, want 7", got)
	}
	observe(l, 800, 10*time.Millisecond)
	if got := l.Limit(); got != 40 {
		t.Fatalf("bound %d, want Max 40", got)
	}
}

// A window whose mean is beyond Tolerance x the uncongested mean cuts the
// bound by Backoff; one slow call in a window does not. Overload errors
// cut too; never below Min.
func TestAIMDCutsOnCongestion(t *testing.T) {
	l := newAIMD(t, admission.AIMDConfig{Initial: 8, Min: 2, Max: 8, Backoff: 0.5})
	observe(l, 8, 10*time.Millisecond)
	for i := range 8 { // one outlier: mean 13.75 ms, not congestion
		d := 10 * time.Millisecond
		if i == 3 {
			d = 40 * time.Millisecond
		}
		l.Observe(admission.Sample{Latency: d, InFlight: 8, Bound: 8})
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
		l.Observe(admission.Sample{Latency: time.Millisecond, Overload: true, Bound: l.Limit()})
	}
	if got := l.Limit(); got != 2 {
		t.Fatalf("after overloads: bound %d, want Min 2", got)
	}
}

// A sample speaks for the bound it was granted under. After a cut, the
// slow grants made under the old bound finish too, and do not cut again;
// after a raise, fast grants made under the old bound do not raise again.
func TestAIMDJudgesOnlyTheCurrentBound(t *testing.T) {
	l := newAIMD(t, admission.AIMDConfig{Initial: 8, Backoff: 0.5})
	observe(l, 8, 10*time.Millisecond) // slow start: 8 -> 16
	observe(l, 8, 40*time.Millisecond) // a congested window at 16: cut to 8
	if got := l.Limit(); got != 8 {
		t.Fatalf("after congestion at 16: bound %d, want 8", got)
	}
	for range 32 { // the rest of the grants made at 16, as slow
		l.Observe(admission.Sample{Latency: 40 * time.Millisecond, InFlight: 16, Bound: 16})
	}
	if got := l.Limit(); got != 8 {
		t.Fatalf("stale samples of bound 16 cut again: bound %d, want 8", got)
	}
	observe(l, 8, 10*time.Millisecond) // fast at 8: raise to 9
	for range 32 {
		l.Observe(admission.Sample{Latency: 10 * time.Millisecond, InFlight: 8, Bound: 8})
	}
	if got := l.Limit(); got != 9 {
		t.Fatalf("stale samples of bound 8 raised again: bound %d, want 9", got)
	}
}

// The uncongested latency is the mean of the low-load samples, not their
// minimum: latencies as noisy as real RPCs' (log-normal, p99 about 3x
// the median) at an unchanging load are not congestion, and the bound
// grows. A window compared with the lowest mean seen would find most
// ordinary windows congested.
func TestAIMDNoisyLatencyIsNotCongestion(t *testing.T) {
	l := newAIMD(t, admission.AIMDConfig{Initial: 4, Max: 64})
	rng := rand.New(rand.NewPCG(7, 7))
	sample := func(median float64) time.Duration {
		return time.Duration(median * math.Exp(0.5*rng.NormFloat64()) * float64(time.Millisecond))
	}
	for range 2000 {
		b := l.Limit()
		l.Observe(admission.Sample{Kind: "RunPodSandbox", Latency: sample(120), InFlight: min(b, 4), Bound: b})
		l.Observe(admission.Sample{Kind: "StartContainer", Latency: sample(60), InFlight: min(b, 4), Bound: b})
	}
	if got := l.Limit(); got < 32 {
		t.Fatalf("bound %d after 4000 samples of one unchanging load, want it grown to 32 or more", got)
	}
}

// Latency that grows with load is congestion even when no low-load
// sample is slow: the uncongested latency is learnt at low load only.
func TestAIMDLearnsBaseAtLowLoad(t *testing.T) {
	l := newAIMD(t, admission.AIMDConfig{Initial: 4, Backoff: 0.5})
	observe(l, 4, 10*time.Millisecond) // at 4 in flight: 10 ms; 4 -> 8
	observe(l, 8, 10*time.Millisecond) // 8 -> 16
	for range 16 {
		l.Observe(admission.Sample{Latency: 30 * time.Millisecond, InFlight: 16, Bound: 16})
	}
	if got := l.Limit(); got != 8 {
		t.Fatalf("3x slower at 16 in flight: bound %d, want cut to 8", got)
	}
}

// A runtime that became slower for good, seen at low load, becomes the
// new uncongested latency: the bound is cut while the change is news, and
// grows again once the low-load mean has moved to it.
func TestAIMDFollowsASlowerRuntime(t *testing.T) {
	l := newAIMD(t, admission.AIMDConfig{Initial: 4, Backoff: 0.5})
	feed := func(n int, d time.Duration) {
		for range n {
			l.Observe(admission.Sample{Latency: d, InFlight: 1, Bound: l.Limit()})
		}
	}
	feed(32, 10*time.Millisecond)
	high := l.Limit()
	feed(32, 30*time.Millisecond)
	low := l.Limit()
	if low >= high {
		t.Fatalf("3x slower: bound %d, want it cut below %d", low, high)
	}
	feed(400, 30*time.Millisecond)
	if got := l.Limit(); got <= low+8 {
		t.Fatalf("a runtime slower for good still looks congested: bound %d, want well above %d", got, low)
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

// recordingLimiter is a constant bound that keeps every sample.
type recordingLimiter struct {
	bound   int
	samples []admission.Sample
}

func (r *recordingLimiter) Limit() int                 { return r.bound }
func (r *recordingLimiter) Observe(s admission.Sample) { r.samples = append(r.samples, s) }

var _ admission.Limiter = (*recordingLimiter)(nil)

// Each sample carries what the grant was made under: its kind, the
// grants in flight with it, and the bound.
func TestControllerSamplesCarryTheirBound(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	rec := &recordingLimiter{bound: 2}
	c := newController(t, admission.WithLimiter(rec), admission.WithClock(clk))
	ctx := context.Background()
	g1, err := c.Acquire(ctx, admission.Request{Pod: "a", Kind: "RunPodSandbox"})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := c.Acquire(ctx, admission.Request{Pod: "b", Kind: "StartContainer"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(30 * time.Millisecond)
	g2.Release(nil)
	clk.Step(20 * time.Millisecond)
	g1.Release(nil)
	want := []admission.Sample{
		{Kind: "StartContainer", Latency: 30 * time.Millisecond, InFlight: 2, Bound: 2},
		{Kind: "RunPodSandbox", Latency: 50 * time.Millisecond, InFlight: 1, Bound: 2},
	}
	if len(rec.samples) != len(want) {
		t.Fatalf("samples %+v, want %+v", rec.samples, want)
	}
	for i := range want {
		if rec.samples[i] != want[i] {
			t.Errorf("sample %d: %+v, want %+v", i, rec.samples[i], want[i])
		}
	}
}

// fakeCPU is a node CPU whose busy share the test sets: each reading
// advances time by one second at that share.
type fakeCPU struct {
	busy, total time.Duration
	share       float64
	err         error
}

// idle passes d on both cores with nothing to do.
func (c *fakeCPU) idle(d time.Duration) { c.total += 2 * d }

func (c *fakeCPU) read() (time.Duration, time.Duration, error) {
	if c.err != nil {
		return 0, 0, c.err
	}
	c.total += 2 * time.Second // two cores
	c.busy += time.Duration(c.share * float64(2*time.Second))
	return c.busy, c.total, nil
}

// With a CPU reading, fast windows raise the bound only while the CPU has
// idle time: a saturated CPU ends slow start and holds the bound, since
// more grants would only share the cores; idle CPU raises it again.
func TestAIMDHoldsWhileCPUSaturated(t *testing.T) {
	cpu := &fakeCPU{share: 1}
	l := newAIMD(t, admission.AIMDConfig{Initial: 4, CPU: cpu.read})
	observe(l, 40, 10*time.Millisecond)
	if got := l.Limit(); got != 4 {
		t.Fatalf("fast windows on a saturated CPU: bound %d, want 4 held", got)
	}
	cpu.share = 0.5
	observe(l, 8, 10*time.Millisecond)
	if got := l.Limit(); got != 5 {
		t.Fatalf("a fast window with idle CPU after slow start: bound %d, want 5", got)
	}
	cpu.share = 0.98 // above SaturatedAt's default 0.97
	observe(l, 24, 10*time.Millisecond)
	if got := l.Limit(); got != 5 {
		t.Fatalf("fast windows at 98%% busy: bound %d, want 5 held", got)
	}
	observe(l, 8, 50*time.Millisecond) // congestion still cuts
	if got := l.Limit(); got != 3 {
		t.Fatalf("a slow window on a saturated CPU: bound %d, want 3", got)
	}
}

// A window's CPU is measured over the window's own samples: an hour of
// idle node before a burst does not make the burst's saturated CPU look
// idle.
func TestAIMDMeasuresCPUOverTheWindow(t *testing.T) {
	cpu := &fakeCPU{share: 1}
	l := newAIMD(t, admission.AIMDConfig{Initial: 4, CPU: cpu.read})
	cpu.idle(time.Hour)
	observe(l, 4, 10*time.Millisecond)
	if got := l.Limit(); got != 4 {
		t.Fatalf("a saturated first window after an idle hour: bound %d, want 4 held", got)
	}
	cpu.idle(time.Hour)
	observe(l, 8, 10*time.Millisecond)
	if got := l.Limit(); got != 4 {
		t.Fatalf("a saturated window after another idle hour: bound %d, want 4 held", got)
	}
}

// A CPU that cannot be read leaves the decision to latency alone, and so
// does a SaturatedAt above the share the CPU is busy.
func TestAIMDWithoutCPUReadingGrows(t *testing.T) {
	broken := &fakeCPU{share: 1, err: errors.New("no /proc")}
	l := newAIMD(t, admission.AIMDConfig{Initial: 4, CPU: broken.read})
	observe(l, 4, 10*time.Millisecond)
	if got := l.Limit(); got != 8 {
		t.Fatalf("unreadable CPU: bound %d after a fast round trip, want 8", got)
	}
	busy := &fakeCPU{share: 0.9}
	l = newAIMD(t, admission.AIMDConfig{Initial: 4, CPU: busy.read, SaturatedAt: 0.95})
	observe(l, 4, 10*time.Millisecond)
	if got := l.Limit(); got != 8 {
		t.Fatalf("90%% busy with SaturatedAt 0.95: bound %d, want 8", got)
	}
}

// NodeCPU reads this machine's CPU time: busy never above the total, and
// both grow.
func TestNodeCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := admission.NodeCPU(); err == nil {
			t.Fatal("NodeCPU without /proc/stat gave a reader")
		}
		return
	}
	read, err := admission.NodeCPU()
	if err != nil {
		t.Fatal(err)
	}
	b1, t1, err := read()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if _, t2, _ := read(); t2 > t1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b2, t2, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if b1 > t1 || b2 > t2 || t2 <= t1 || b2 < b1 {
		t.Fatalf("readings (%v, %v) then (%v, %v): want busy <= total, both growing", b1, t1, b2, t2)
	}
}
