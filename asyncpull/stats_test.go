package asyncpull_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/asyncpull"
)

// expectStats fails the test unless s.Stats() is exactly want.
func expectStats(t *testing.T, s *asyncpull.Scheduler, step string, want asyncpull.Stats) {
	t.Helper()
	if got := s.Stats(); got != want {
		t.Fatalf("%s:\n Stats = %+v\n want    %+v", step, got, want)
	}
}

// TestStatsPullLifecycle walks pulls through queue, runtime, success, failure, back-off and
// cancellation with one slot, checking every field at each step. Every step is deterministic:
// with MaxParallel(1) the dispatcher cannot start a queued pull while one runs, and each
// synchronisation point (a PullImage call arriving, a subscription signal) happens after the
// state change it waits for, under the same lock.
func TestStatsPullLifecycle(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(1))
	defer s.Close()
	bg := context.Background()
	always := func(image string, pod types.UID) asyncpull.Request {
		// PullAlways skips the presence check, so the pull is queued synchronously.
		return asyncpull.Request{Image: image, PodUID: pod, PullPolicy: asyncpull.PullAlways}
	}

	expectStats(t, s, "new", asyncpull.Stats{})

	s.Ensure(bg, always(img(1), "a"))
	c1 := imgs.nextCall(t)
	expectStats(t, s, "img1 in the runtime", asyncpull.Stats{Running: 1, PodsWaiting: 1, PullsStarted: 1})

	s.Ensure(bg, always(img(1), "b")) // joins the running pull
	s.Ensure(bg, always(img(1), "a")) // a asks again: joins too
	s.Ensure(bg, always(img(2), "c")) // queued behind the only slot
	s.Ensure(bg, always(img(2), ""))  // anonymous: joins, is not a pod
	s.Ensure(bg, always(img(3), "d")) // queued
	expectStats(t, s, "two queued behind img1", asyncpull.Stats{
		Queued: 2, Running: 1, PodsWaiting: 4, PullsStarted: 1, DedupeHits: 3,
	})

	s.Cancel("d") // img3's only waiter: dropped from the queue
	expectStats(t, s, "img3 dropped", asyncpull.Stats{
		Queued: 1, Running: 1, PodsWaiting: 3, PullsStarted: 1, DedupeHits: 3, Canceled: 1,
	})

	c1.release(nil)
	c2 := imgs.nextCall(t) // starts only once img1's slot is free, i.e. after img1 is counted
	if c2.Image != img(2) {
		t.Fatalf("PullImage(%s), want %s", c2.Image, img(2))
	}
	expectStats(t, s, "img1 done, img2 in the runtime", asyncpull.Stats{
		Running: 1, PodsWaiting: 1, PullsStarted: 2, PullsSucceeded: 1, DedupeHits: 3, Canceled: 1,
	})

	sub := mustSub(s.Subscribe("c"))
	defer sub.Close()
	c2.release(errManifestUnknown)
	awaitSignal(t, sub, "img2 failed")
	afterFailure := asyncpull.Stats{
		ImagesInBackOff: 1, PullsStarted: 2, PullsSucceeded: 1, PullsFailed: 1, DedupeHits: 3, Canceled: 1,
	}
	expectStats(t, s, "img2 failed", afterFailure)

	// The back-off (10s) is measured on the scheduler's clock when Stats is called.
	clk.Step(10*time.Second - time.Nanosecond)
	expectStats(t, s, "1ns before the back-off ends", afterFailure)
	clk.Step(time.Nanosecond)
	afterFailure.ImagesInBackOff = 0
	expectStats(t, s, "back-off ended", afterFailure)

	// A running pull whose last waiter leaves is cancelled: counted in Canceled, and in
	// neither PullsSucceeded nor PullsFailed when its PullImage returns.
	s.Ensure(bg, always(img(4), "e"))
	imgs.nextCall(t)
	expectStats(t, s, "img4 in the runtime", asyncpull.Stats{
		Running: 1, PodsWaiting: 1, PullsStarted: 3, PullsSucceeded: 1, PullsFailed: 1, DedupeHits: 3, Canceled: 1,
	})
	s.Cancel("e")
	eventually(t, "cancelled PullImage returned", func() bool { return s.Stats().Running == 0 })
	final := asyncpull.Stats{PullsStarted: 3, PullsSucceeded: 1, PullsFailed: 1, DedupeHits: 3, Canceled: 2}
	expectStats(t, s, "img4 cancelled", final)
	if st := s.Stats(); st.PullsStarted-uint64(st.Running)-st.PullsSucceeded-st.PullsFailed != 1 {
		t.Fatalf("started pulls that ended cancelled = %d, want 1", st.PullsStarted-uint64(st.Running)-st.PullsSucceeded-st.PullsFailed)
	}

	// Close ends nothing here and keeps the counters; Stats still answers.
	s.Close()
	expectStats(t, s, "after Close", final)
}

// heldChecks is an ImageService whose ImageStatus calls wait until release is closed, so a
// test can look at the scheduler while presence checks are in flight.
type heldChecks struct {
	*testImages
	entered chan string
	release chan struct{}
}

func (h *heldChecks) ImageStatus(ctx context.Context, spec *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	h.entered <- spec.GetImage()
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.testImages.ImageStatus(ctx, spec, verbose)
}

func (h *heldChecks) awaitCheck(t *testing.T, image string) {
	t.Helper()
	select {
	case got := <-h.entered:
		if got != image {
			t.Fatalf("ImageStatus(%s), want %s", got, image)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no ImageStatus(%s) call arrived", image)
	}
}

func TestStatsPresenceChecks(t *testing.T) {
	h := &heldChecks{testImages: newTestImages(false), entered: make(chan string, 100), release: make(chan struct{})}
	s := newScheduler(h, asyncpull.WithQPS(0, 0))
	defer s.Close()
	bg := context.Background()

	s.Ensure(bg, asyncpull.Request{Image: img(1), PodUID: "a"})
	h.awaitCheck(t, img(1))
	s.Ensure(bg, asyncpull.Request{Image: img(1), PodUID: "b"}) // joins the check
	s.Ensure(bg, asyncpull.Request{Image: img(2), PodUID: "c"})
	h.awaitCheck(t, img(2))
	expectStats(t, s, "two checks in flight", asyncpull.Stats{Checking: 2, PodsWaiting: 3, DedupeHits: 1})

	s.Cancel("c") // img2's only waiter: the check is dropped
	expectStats(t, s, "img2 check dropped", asyncpull.Stats{Checking: 1, PodsWaiting: 2, DedupeHits: 1, Canceled: 1})

	sub := mustSub(s.Subscribe("a"))
	defer sub.Close()
	close(h.release) // img1 is absent: it is queued and pulled (not gated)
	awaitSignal(t, sub, "img1 pulled")
	done := asyncpull.Stats{PullsStarted: 1, PullsSucceeded: 1, DedupeHits: 1, Canceled: 1}
	expectStats(t, s, "img1 pulled", done)

	// A request answered from what the scheduler knows is neither a dedupe hit nor a pull.
	if res := s.Ensure(bg, asyncpull.Request{Image: img(1), PodUID: "z"}); res.State != asyncpull.StatePresent {
		t.Fatalf("Ensure after the pull = %+v, want Present", res)
	}
	expectStats(t, s, "present image", done)
}

func TestStatsPullTimeoutIsAFailure(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithClock(clk), asyncpull.WithQPS(0, 0), asyncpull.WithPullTimeout(time.Minute))
	defer s.Close()
	sub := mustSub(s.Subscribe("p"))
	defer sub.Close()
	s.Ensure(context.Background(), asyncpull.Request{Image: img(1), PodUID: "p", PullPolicy: asyncpull.PullAlways})
	imgs.nextCall(t)
	eventually(t, "deadline timer armed", clk.HasWaiters)
	clk.Step(time.Minute)
	awaitSignal(t, sub, "pull timed out")
	expectStats(t, s, "timed out", asyncpull.Stats{ImagesInBackOff: 1, PullsStarted: 1, PullsFailed: 1})
}

func TestStatsClose(t *testing.T) {

	imgs := newTestImages(true)
	s := newScheduler(imgs, asyncpull.WithQPS(0, 0), asyncpull.WithMaxParallel(1))
	bg := context.Background()
	s.Ensure(bg, asyncpull.Request{Image: img(1), PodUID: "a", PullPolicy: asyncpull.PullAlways})
	imgs.nextCall(t)
	s.Ensure(bg, asyncpull.Request{Image: img(2), PodUID: "b", PullPolicy: asyncpull.PullAlways})
	s.Close()
	// Close waited for the pull's goroutine; what Close ended counts as neither a failure nor
	// a cancellation.
	expectStats(t, s, "closed with one running and one queued", asyncpull.Stats{PullsStarted: 1})
}

// TestStatsConcurrent reads Stats while many pods request few images (under -race). Every
// snapshot must be consistent, and at the end each image was pulled exactly once.
func TestStatsConcurrent(t *testing.T) {
	imgs := newTestImages(false)
	s := newScheduler(imgs, asyncpull.WithQPS(0, 0))
	defer s.Close()
	const pods, images = 20, 5
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := s.Stats()
			if ended := st.PullsSucceeded + st.PullsFailed + uint64(st.Running); ended > st.PullsStarted {
				t.Errorf("inconsistent snapshot: %+v", st)
				return
			}
			if st.Running > images || st.PodsWaiting > pods {
				t.Errorf("impossible snapshot: %+v", st)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for p := range pods {
		for i := range images {
			wg.Go(func() {
				req := asyncpull.Request{Image: img(i), PodUID: types.UID(fmt.Sprintf("pod-%d", p))}
				if _, err := s.Wait(context.Background(), req); err != nil {
					t.Errorf("Wait(%s): %v", req, err)
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	reader.Wait()
	st := s.Stats()
	if st.PullsStarted != images || st.PullsSucceeded != images || st.PullsFailed != 0 || st.Canceled != 0 ||
		st.Running != 0 || st.Queued != 0 || st.Checking != 0 || st.PodsWaiting != 0 || st.DedupeHits > pods*images-images {
		t.Fatalf("after every Wait: %+v", st)
	}
}
