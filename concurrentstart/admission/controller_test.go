package admission_test

import (
	"context"
	"errors"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/concurrentstart/admission"
)

type result struct {
	name string
	g    *admission.Grant
	err  error
}

// queue starts an Acquire in a goroutine and waits until the controller
// counts it as queued or granted, so that arrival order is the call order.
func queue(t *testing.T, c *admission.Controller, ctx context.Context, name, pod string, prio int, out chan<- result) {
	t.Helper()
	queueRequest(t, c, ctx, name, admission.Request{Pod: pod, Priority: prio}, out)
}

func queueRequest(t *testing.T, c *admission.Controller, ctx context.Context, name string, req admission.Request, out chan<- result) {
	t.Helper()
	before := c.Stats()
	go func() {
		g, err := c.Acquire(ctx, req)
		out <- result{name, g, err}
	}()
	waitUntil(t, func() bool {
		s := c.Stats()
		return s.Queued+int(s.Granted) > before.Queued+int(before.Granted)
	})
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

func newController(t *testing.T, opts ...admission.Option) *admission.Controller {
	t.Helper()
	c, err := admission.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Pods are served in arrival order: a pod that arrived first keeps its
// place for its later work, ahead of pods that arrived after it.
func TestFIFOAcrossPods(t *testing.T) {
	c := newController(t, admission.WithLimiter(admission.Fixed(1)))
	ctx := context.Background()
	out := make(chan result, 8)
	queue(t, c, ctx, "a1", "a", 0, out)
	first := <-out
	queue(t, c, ctx, "b1", "b", 0, out)
	queue(t, c, ctx, "c1", "c", 0, out)
	queue(t, c, ctx, "a2", "a", 0, out)
	queue(t, c, ctx, "b2", "b", 0, out)
	first.g.Release(nil)
	var order []string
	for range 4 {
		r := <-out
		if r.err != nil {
			t.Fatal(r.err)
		}
		order = append(order, r.name)
		r.g.Release(nil)
	}
	want := []string{"a2", "b1", "b2", "c1"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("grant order %v, want %v", order, want)
		}
	}
}

// A pod's arrival given in its first request orders it, not the order in
// which the workers reached Acquire; a later request of the pod keeps the
// first arrival.
func TestArrivedOrdersPods(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(100, 0))
	c := newController(t, admission.WithLimiter(admission.Fixed(1)), admission.WithClock(clk))
	ctx := context.Background()
	out := make(chan result, 8)
	queue(t, c, ctx, "x1", "x", 0, out) // arrives now, t=100: holds the only slot
	first := <-out
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	queueRequest(t, c, ctx, "c1", admission.Request{Pod: "c", Arrived: at(30)}, out)
	queueRequest(t, c, ctx, "b1", admission.Request{Pod: "b", Arrived: at(20)}, out)
	queueRequest(t, c, ctx, "y1", admission.Request{Pod: "y"}, out) // arrives now, t=100
	queueRequest(t, c, ctx, "a1", admission.Request{Pod: "a", Arrived: at(10)}, out)
	queueRequest(t, c, ctx, "c2", admission.Request{Pod: "c", Arrived: at(1)}, out) // c arrived at 30 already
	first.g.Release(nil)
	var order []string
	for range 5 {
		r := <-out
		if r.err != nil {
			t.Fatal(r.err)
		}
		order = append(order, r.name)
		r.g.Release(nil)
	}
	want := []string{"a1", "b1", "c1", "c2", "y1"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("grant order %v, want %v", order, want)
		}
	}
}

// No more grants are held than the bound.
func TestBoundHolds(t *testing.T) {
	c := newController(t, admission.WithLimiter(admission.Fixed(2)))
	out := make(chan result, 5)
	for i := range 5 {
		queue(t, c, context.Background(), "r", string(rune('a'+i)), 0, out)
	}
	s := c.Stats()
	if s.Held != 2 || s.Queued != 3 || s.Limit != 2 {
		t.Fatalf("stats %+v, want 2 held and 3 queued", s)
	}
	for range 5 {
		r := <-out
		if got := c.Stats().Held; got > 2 {
			t.Fatalf("%d held, bound 2", got)
		}
		r.g.Release(nil)
	}
}

// Priority goes first; aging lets a low-priority pod overtake newer
// high-priority pods once it has waited long enough, so it never starves.
func TestPriorityAndAging(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	c := newController(t, admission.WithLimiter(admission.Fixed(1)), admission.WithAging(time.Second), admission.WithClock(clk))
	ctx := context.Background()
	out := make(chan result, 8)
	queue(t, c, ctx, "hold", "h", 0, out)
	hold := <-out
	queue(t, c, ctx, "low", "low", 0, out)
	queue(t, c, ctx, "high", "high", 5, out)
	hold.g.Release(nil)
	if r := <-out; r.name != "high" {
		t.Fatalf("granted %s first, want high", r.name)
	} else {
		hold = r
	}
	clk.Step(10 * time.Second) // low has waited 10 intervals: 0+10 > 5
	queue(t, c, ctx, "newer-high", "high2", 5, out)
	hold.g.Release(nil)
	r := <-out
	if r.name != "low" {
		t.Fatalf("granted %s, want low (aged past the newer high-priority pod)", r.name)
	}
	r.g.Release(nil)
	r = <-out
	r.g.Release(nil)
}

// Forget fails a deleted pod's queued work and frees no held grant; a
// cancelled request leaves the line and the next one gets the slot.
func TestForgetAndCancel(t *testing.T) {
	c := newController(t, admission.WithLimiter(admission.Fixed(1)))
	out := make(chan result, 8)
	queue(t, c, context.Background(), "hold", "h", 0, out)
	hold := <-out
	queue(t, c, context.Background(), "gone", "deleted", 0, out)
	cctx, cancel := context.WithCancel(context.Background())
	queue(t, c, cctx, "cancelled", "impatient", 0, out)
	queue(t, c, context.Background(), "next", "n", 0, out)

	c.Forget("deleted")
	if r := <-out; r.name != "gone" || !errors.Is(r.err, admission.ErrForgotten) {
		t.Fatalf("%s: %v, want gone: ErrForgotten", r.name, r.err)
	}
	cancel()
	if r := <-out; r.name != "cancelled" || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("%s: %v, want cancelled: context.Canceled", r.name, r.err)
	}
	if s := c.Stats(); s.Held != 1 || s.Queued != 1 || s.Pods != 3 {
		t.Fatalf("stats %+v, want 1 held, 1 queued, 3 pods (h, impatient, n)", s)
	}
	hold.g.Release(nil)
	if r := <-out; r.name != "next" || r.err != nil {
		t.Fatalf("%s: %v, want next granted", r.name, r.err)
	} else {
		r.g.Release(nil)
	}
}

// Close fails queued and later requests with ErrClosed; held grants can
// still be released.
func TestCloseFailsWaiters(t *testing.T) {
	c := newController(t, admission.WithLimiter(admission.Fixed(1)))
	out := make(chan result, 2)
	queue(t, c, context.Background(), "hold", "h", 0, out)
	hold := <-out
	queue(t, c, context.Background(), "waiting", "w", 0, out)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if r := <-out; !errors.Is(r.err, admission.ErrClosed) {
		t.Fatalf("queued request: %v, want ErrClosed", r.err)
	}
	if _, err := c.Acquire(context.Background(), admission.Request{Pod: "late"}); !errors.Is(err, admission.ErrClosed) {
		t.Fatalf("Acquire after Close: %v, want ErrClosed", err)
	}
	hold.g.Release(nil)
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
