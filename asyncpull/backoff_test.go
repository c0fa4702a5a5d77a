package asyncpull_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/asyncpull"
)

// missingImage is already normalised: the runtime is asked for exactly this reference.
const missingImage = "registry.example/missing:v1"

var errManifestUnknown = status.Error(codes.NotFound, "manifest unknown")

// wakeLog records WithNotify calls in order.
type wakeLog struct{ ch chan types.UID }

func newWakeLog() *wakeLog { return &wakeLog{ch: make(chan types.UID, 100)} }

func (l *wakeLog) notify(p types.UID) { l.ch <- p }

// next returns the next woken pod, failing the test if none comes.
func (l *wakeLog) next(tb testing.TB) types.UID {
	tb.Helper()
	select {
	case p := <-l.ch:
		return p
	case <-time.After(20 * time.Second):
		tb.Fatal("no WithNotify call arrived")
		return ""
	}
}

// none asserts that no WithNotify call has been made since the last next.
func (l *wakeLog) none(tb testing.TB) {
	tb.Helper()
	select {
	case p := <-l.ch:
		tb.Fatalf("unexpected wake-up of pod %s", p)
	default:
	}
}

// signalled reports whether sub has a pending signal, consuming it.
// signalled reports whether sub holds a wake-up; a channel closed by the
// subscription's end is none.
func signalled(sub *asyncpull.Subscription) bool {
	select {
	case _, ok := <-sub.Events():
		return ok
	default:
		return false
	}
}

// awaitSignal waits for a signal on sub, failing the test if none comes.
func awaitSignal(tb testing.TB, sub *asyncpull.Subscription, what string) {
	tb.Helper()
	select {
	case _, ok := <-sub.Events():
		if !ok {
			tb.Fatalf("subscription ended (%v) before the wake-up: %s", sub.Err(), what)
		}
	case <-time.After(20 * time.Second):
		tb.Fatalf("no wake-up: %s", what)
	}
}

// failPull makes the pull for req fail on a gated runtime and collects the failure, so the
// image is in back-off and req's pod has no result waiting.
func failPull(t *testing.T, s *asyncpull.Scheduler, imgs *testImages, req asyncpull.Request) {
	t.Helper()
	ctx := context.Background()
	s.Ensure(ctx, req)
	imgs.nextCall(t).release(errManifestUnknown)
	eventually(t, "failure collected", func() bool { return s.Ensure(ctx, req).State == asyncpull.StateFailed })
}

// meetBackOff asks for req during its back-off and returns the time left.
func meetBackOff(t *testing.T, ctx context.Context, s *asyncpull.Scheduler, clk clock.PassiveClock, req asyncpull.Request) time.Duration {
	t.Helper()
	res := s.Ensure(ctx, req)
	if res.State != asyncpull.StateBackOff || res.Reason != asyncpull.ReasonImagePullBackOff {
		t.Fatalf("Ensure(%s) = %+v, want BackOff", req.PodUID, res)
	}
	return res.BackOffUntil.Sub(clk.Now())
}

// syncDispatcher makes the dispatcher run at least once more and waits for it: it queues a
// pull of image for pod, waits for its PullImage call and lets it succeed. Signals the
// dispatcher sends to subscriptions in that run are visible when it returns; WithNotify calls
// for pods it marked come before pod's own.
func syncDispatcher(t *testing.T, s *asyncpull.Scheduler, imgs *testImages, image string, pod types.UID) {
	t.Helper()
	s.Ensure(context.Background(), asyncpull.Request{Image: image, PodUID: pod, PullPolicy: asyncpull.PullAlways})
	c := imgs.nextCall(t)
	if c.Image != image {
		t.Fatalf("PullImage(%s), want %s", c.Image, image)
	}
	c.release(nil)
}

func TestBackOffExpiryWakesExactlyTheWaitingPod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(true)
	log := newWakeLog()
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithNotify(log.notify))
	defer s.Close()
	ctx := context.Background()
	subA, subB := mustSub(s.Subscribe("a")), mustSub(s.Subscribe("b"))
	defer subA.Close()
	defer subB.Close()
	reqA := asyncpull.Request{Image: missingImage, PodUID: "a"}
	reqB := asyncpull.Request{Image: missingImage, PodUID: "b"}

	// a and b share the failing pull; both are woken for the failure and collect it.
	s.Ensure(ctx, reqA)
	s.Ensure(ctx, reqB)
	imgs.nextCall(t).release(errManifestUnknown)
	awaitSignal(t, subA, "a: failure")
	awaitSignal(t, subB, "b: failure")
	if got := map[types.UID]bool{log.next(t): true, log.next(t): true}; !got["a"] || !got["b"] {
		t.Fatalf("notified for the failure: %v, want a and b", got)
	}
	for _, req := range []asyncpull.Request{reqA, reqB} {
		if res := s.Ensure(ctx, req); res.State != asyncpull.StateFailed || res.Reason != asyncpull.ReasonErrImagePull {
			t.Fatalf("Ensure(%s) = %+v, want the failure", req.PodUID, res)
		}
	}
	// Only a asks again during the back-off; b does not.
	d := meetBackOff(t, ctx, s, clk, reqA)
	if d != asyncpull.DefaultBackOffInitial {
		t.Fatalf("back-off = %v, want %v", d, asyncpull.DefaultBackOffInitial)
	}
	eventually(t, "back-off timer armed", clk.HasWaiters)

	clk.Step(d - time.Second)
	if !clk.HasWaiters() {
		t.Fatal("the back-off timer fired before the back-off ended")
	}
	syncDispatcher(t, s, imgs, img(1), "z1")
	if signalled(subA) || signalled(subB) {
		t.Fatal("pod woken before its back-off ended")
	}
	if p := log.next(t); p != "z1" {
		t.Fatalf("notified %s before the back-off ended", p)
	}
	if res := s.Ensure(ctx, reqA); res.State != asyncpull.StateBackOff {
		t.Fatalf("1s before expiry: %+v", res)
	}

	clk.Step(time.Second)
	awaitSignal(t, subA, "a: back-off ended")
	if p := log.next(t); p != "a" {
		t.Fatalf("notified %s, want a", p)
	}
	syncDispatcher(t, s, imgs, img(2), "z2")
	if signalled(subB) {
		t.Fatal("b woken for a back-off it did not ask about")
	}
	if p := log.next(t); p != "z2" {
		t.Fatalf("notified %s, want only a for the back-off", p)
	}

	// a's next Ensure starts the retry, which it is woken for like any pull.
	if res := s.Ensure(ctx, reqA); res.State != asyncpull.StateQueued && res.State != asyncpull.StatePulling {
		t.Fatalf("Ensure after the back-off = %+v, want a new pull", res)
	}
	c := imgs.nextCall(t)
	if c.Image != missingImage {
		t.Fatalf("retry pulled %s, want %s", c.Image, missingImage)
	}
	c.release(nil)
	awaitSignal(t, subA, "a: retry done")
	if res := s.Ensure(ctx, reqA); res.State != asyncpull.StatePresent {
		t.Fatalf("after the retry: %+v", res)
	}
	if p := log.next(t); p != "a" {
		t.Fatalf("notified %s for the retry, want a", p)
	}
	log.none(t)
	if signalled(subB) {
		t.Fatal("b woken")
	}
}

func TestBackOffExpirySkipsCanceledPods(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(true)
	log := newWakeLog()
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithNotify(log.notify))
	defer s.Close()
	ctx := context.Background()
	failPull(t, s, imgs, asyncpull.Request{Image: missingImage, PodUID: "a"})
	if p := log.next(t); p != "a" {
		t.Fatalf("notified %s for the failure, want a", p)
	}
	subs := map[types.UID]*asyncpull.Subscription{}
	for _, p := range []types.UID{"a", "canceled", "ctxdone"} {
		subs[p] = mustSub(s.Subscribe(p))
		defer subs[p].Close()
	}
	podCtx, cancelPod := context.WithCancel(ctx)
	defer cancelPod()
	d := meetBackOff(t, ctx, s, clk, asyncpull.Request{Image: missingImage, PodUID: "a"})
	meetBackOff(t, ctx, s, clk, asyncpull.Request{Image: missingImage, PodUID: "canceled"})
	meetBackOff(t, podCtx, s, clk, asyncpull.Request{Image: missingImage, PodUID: "ctxdone"})
	s.Cancel("canceled")
	cancelPod()
	eventually(t, "back-off timer armed", clk.HasWaiters)

	clk.Step(d)
	awaitSignal(t, subs["a"], "a: back-off ended")
	// The expiry signals every waiting pod at once, so the others would be signalled by now.
	if signalled(subs["canceled"]) {
		t.Fatal("pod woken after Cancel")
	}
	if signalled(subs["ctxdone"]) {
		t.Fatal("pod woken after its context ended")
	}
	if p := log.next(t); p != "a" {
		t.Fatalf("notified %s, want a", p)
	}
	syncDispatcher(t, s, imgs, img(1), "z")
	if p := log.next(t); p != "z" {
		t.Fatalf("notified %s, want only a for the back-off", p)
	}
}

func TestBackOffExpiryNoWakeAfterClose(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(true)
	log := newWakeLog()
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithNotify(log.notify))
	req := asyncpull.Request{Image: missingImage, PodUID: "a"}
	failPull(t, s, imgs, req)
	if p := log.next(t); p != "a" {
		t.Fatalf("notified %s for the failure, want a", p)
	}
	sub := mustSub(s.Subscribe("a"))
	defer sub.Close()
	d := meetBackOff(t, context.Background(), s, clk, req)
	eventually(t, "back-off timer armed", clk.HasWaiters)

	s.Close()
	if clk.HasWaiters() {
		t.Fatal("Close left the back-off timer armed")
	}
	clk.Step(d + time.Hour)
	// Close waited for every scheduler goroutine: nothing can signal any more.
	if signalled(sub) {
		t.Fatal("pod woken after Close")
	}
	if !errors.Is(sub.Err(), asyncpull.ErrClosed) {
		t.Fatalf("subscription Err after the scheduler's Close: %v, want ErrClosed", sub.Err())
	}
	log.none(t)
}

func TestBackOffExpiryLateSubscription(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0))
	defer s.Close()
	ctx := context.Background()
	req := asyncpull.Request{Image: missingImage, PodUID: "a"}
	failPull(t, s, imgs, req)
	d := meetBackOff(t, ctx, s, clk, req)
	eventually(t, "back-off timer armed", clk.HasWaiters)
	clk.Step(d)

	// A subscription made after the back-off ended is signalled at once, like one made after
	// a result is ready ...
	eventually(t, "late subscription signalled", func() bool {
		sub := mustSub(s.Subscribe("a"))
		defer sub.Close()
		return signalled(sub)
	})
	// ... until the pod asks again.
	if res := s.Ensure(ctx, req); res.State != asyncpull.StateQueued && res.State != asyncpull.StatePulling {
		t.Fatalf("Ensure after the back-off = %+v, want a new pull", res)
	}
	sub := mustSub(s.Subscribe("a"))
	defer sub.Close()
	if signalled(sub) {
		t.Fatal("subscription signalled for a back-off expiry already collected")
	}
	imgs.nextCall(t).release(nil)
	awaitSignal(t, sub, "retry done")
}

func TestBackOffExpiryWakesAfterClockJump(t *testing.T) {
	// Idle back-off entries are dropped after 2*max; one with a waiting pod must survive until
	// the pod is woken, however far the clock jumps.
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0))
	defer s.Close()
	req := asyncpull.Request{Image: missingImage, PodUID: "a"}
	failPull(t, s, imgs, req)
	sub := mustSub(s.Subscribe("a"))
	defer sub.Close()
	meetBackOff(t, context.Background(), s, clk, req)
	eventually(t, "back-off timer armed", clk.HasWaiters)
	clk.Step(24 * time.Hour)
	awaitSignal(t, sub, "back-off ended long ago")
}

// lateTimers is a fake clock whose timers fire an hour late: the dispatcher sees expiries long
// after the fact.
type lateTimers struct{ *clocktesting.FakeClock }

func (c lateTimers) NewTimer(d time.Duration) clock.Timer { return c.FakeClock.NewTimer(d + time.Hour) }

func TestBackOffRetryByAnotherPodWakesWaiters(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithClock(lateTimers{fake}), asyncpull.WithQPS(0, 0))
	defer s.Close()
	ctx := context.Background()
	reqA := asyncpull.Request{Image: missingImage, PodUID: "a"}
	reqB := asyncpull.Request{Image: missingImage, PodUID: "b"}
	failPull(t, s, imgs, reqA)
	subA, subB := mustSub(s.Subscribe("a")), mustSub(s.Subscribe("b"))
	defer subA.Close()
	defer subB.Close()
	d := meetBackOff(t, ctx, s, fake, reqA)
	meetBackOff(t, ctx, s, fake, reqB)
	eventually(t, "dispatcher saw the waiting pods", fake.HasWaiters)
	fake.Step(d) // the back-off has ended; the dispatcher's timer has not fired

	// b asks first and starts the retry: a, still waiting, is woken by that very call (not an
	// hour later by the timer), and b is not woken for an expiry it has just acted on.
	if res := s.Ensure(ctx, reqB); res.State.Done() {
		t.Fatalf("Ensure(b) after the back-off = %+v, want a new pull", res)
	}
	if !signalled(subA) {
		t.Fatal("a not woken when the retry started")
	}
	if signalled(subB) {
		t.Fatal("b woken for the retry it started")
	}
	// a joins the same retry.
	if res := s.Ensure(ctx, reqA); res.State.Done() {
		t.Fatalf("Ensure(a) = %+v, want to join the retry", res)
	}
	imgs.nextCall(t).release(nil)
	awaitSignal(t, subA, "a: retry done")
	awaitSignal(t, subB, "b: retry done")
	for _, req := range []asyncpull.Request{reqA, reqB} {
		if res := s.Ensure(ctx, req); res.State != asyncpull.StatePresent {
			t.Fatalf("Ensure(%s) = %+v", req.PodUID, res)
		}
	}
	if n := imgs.pullCount(); n != 2 {
		t.Fatalf("PullImage calls = %d, want 2 (the failure and one shared retry)", n)
	}
	imgs.noCall(t)
}
