package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/criclient/podcri"
)

// asyncGate is the syncpod-mode image gate: asyncpull's scheduler, which
// dedupes pulls, bounds them, backs off failures and wakes the pod's
// worker when a result is ready. The worker never waits for a pull.
type asyncGate struct {
	s        *asyncpull.Scheduler
	inflight atomic.Int64
	auth     pullAuthFunc

	// awaiting holds the pod/image pairs whose Ensure answered "queued" or
	// "pulling": an inspection or a pull is working for them, and a notify
	// will follow. Each is one count in active until that notify has woken
	// the pod's worker (which counts itself), or Ensure answers otherwise.
	active   *activity
	mu       sync.Mutex
	awaiting map[types.UID]map[string]bool
}

var _ imageGate = (*asyncGate)(nil)

// newImageGate builds the syncpod-mode image gate.
func newImageGate(img cri.ImageManagerService, clk clock.WithTickerAndDelayedExecution, log *zap.Logger, cfg config,
	active *activity, wake func(types.UID), obs func(string, time.Duration, error), auth pullAuthFunc) (imageGate, error) {
	g := &asyncGate{active: active, awaiting: map[types.UID]map[string]bool{}, auth: auth}
	s, err := asyncpull.New(img, append([]asyncpull.Option{
		asyncpull.WithClock(clk),
		asyncpull.WithLogger(log),
		// No more pulls in the runtime than it downloads at once: pulls
		// beyond that wait inside the runtime in an order of its own, and
		// an init image, which every later step of its pods waits for,
		// could come last. Queued here, they start by priority.
		asyncpull.WithMaxParallel(cfg.pullParallel),
		asyncpull.WithQueuePolicy(asyncpull.PriorityPolicy{Aging: cfg.scaled(pullPriorityAging)}),
		asyncpull.WithBackOff(cfg.scaled(imagePullBackoff), cfg.scaled(300*time.Second)),
		asyncpull.WithNotify(func(uid types.UID) {
			wake(uid)
			g.settle(uid, "")
		}),
		asyncpull.WithObserver(func(e asyncpull.Event) {
			switch e.Kind {
			case asyncpull.EventPullStarted:
				g.inflight.Add(1)
			case asyncpull.EventPullFinished:
				g.inflight.Add(-1)
				obs(e.Image, e.Duration, e.Err)
			}
		})}, cfg.pullOpts...)...)
	if err != nil {
		return nil, err
	}
	g.s = s
	return g, nil
}

func (g *asyncGate) ensure(_ context.Context, uid types.UID, image string, priority int32, sb *runtimeapi.PodSandboxConfig) (bool, error) {
	// The interest lives as long as the pod: forget (Cancel) ends it.
	auth, _ := g.auth(nil, uid, image)
	res := g.s.Ensure(context.Background(), asyncpull.Request{Image: image, PullPolicy: asyncpull.PullIfNotPresent,
		Auth: auth, PodSandboxConfig: sb, PodUID: uid, Priority: priority})
	if res.State == asyncpull.StateQueued || res.State == asyncpull.StatePulling {
		g.await(uid, image)
	} else {
		g.settle(uid, image)
	}
	switch res.State {
	case asyncpull.StatePresent:
		return true, nil
	case asyncpull.StateBackOff, asyncpull.StateFailed:
		return false, &pullError{Reason: res.Reason, Image: image, Err: res.Err}
	}
	return false, nil
}

func (g *asyncGate) prefetch(ctx context.Context, pod *corev1.Pod, sb *runtimeapi.PodSandboxConfig) {
	for _, image := range podImages(pod) {
		if _, known := g.auth(pod, pod.UID, image); !known {
			return // its sync reads its pull secrets, then pulls
		}
		_, _ = g.ensure(ctx, pod.UID, image, pullPriority(pod, image), sb)
	}
}

func (g *asyncGate) inFlight() int { return int(g.inflight.Load()) }
func (g *asyncGate) close()        { _ = g.s.Close() }

func (g *asyncGate) forget(uid types.UID) {
	g.s.Cancel(uid)
	g.settle(uid, "")
}

func (g *asyncGate) await(uid types.UID, image string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.awaiting[uid]
	if m == nil {
		m = map[string]bool{}
		g.awaiting[uid] = m
	}
	if !m[image] {
		m[image] = true
		g.active.add(1)
	}
}

// settle drops uid's wait for image, or for every image when image is "".
func (g *asyncGate) settle(uid types.UID, image string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.awaiting[uid]
	for img := range m {
		if image == "" || img == image {
			delete(m, img)
			g.active.add(-1)
		}
	}
	if len(m) == 0 {
		delete(g.awaiting, uid)
	}
}

// reasonImageInspectError is the kubelet's reason for an image whose
// status the runtime could not give.
const reasonImageInspectError = "ImageInspectError"

// pullError is a pull that did not give the image: Reason is the
// kubelet's (asyncpull's errImagePull, ImagePullBackOff, ...). A failed
// pull (errImagePull) matches errImagePull.
type pullError struct {
	Reason, Image string
	Err           error
}

func (e *pullError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Reason, e.Image, e.Err) }
func (e *pullError) Unwrap() error { return e.Err }

// Is makes a failed pull match errImagePull.
func (e *pullError) Is(target error) bool {
	return target == errImagePull && e.Reason == asyncpull.ReasonErrImagePull
}

// pullWaiting is why a container whose image did not come waits, as the
// kubelet shows it.
func pullWaiting(err error) podcri.Waiting {
	var pe *pullError
	if !errors.As(err, &pe) {
		return podcri.Waiting{Reason: asyncpull.ReasonErrImagePull, Message: err.Error()}
	}
	if pe.Reason == asyncpull.ReasonImagePullBackOff {
		return podcri.Waiting{Reason: pe.Reason, Message: fmt.Sprintf("Back-off pulling image %q", pe.Image)}
	}
	return podcri.Waiting{Reason: pe.Reason, Message: pe.Err.Error()}
}
