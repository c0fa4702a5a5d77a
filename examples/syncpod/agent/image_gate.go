package agent

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/asyncpull"
)

// asyncGate is the syncpod-mode image gate: asyncpull's scheduler, which
// dedupes pulls, bounds them, backs off failures and wakes the pod's
// worker when a result is ready. The worker never waits for a pull.
type asyncGate struct {
	s        *asyncpull.Scheduler
	inflight atomic.Int64
}

var _ imageGate = (*asyncGate)(nil)

// newImageGate builds the syncpod-mode image gate.
func newImageGate(img cri.ImageManagerService, clk clock.WithTickerAndDelayedExecution, log *zap.Logger, cfg config,
	wake func(types.UID), obs func(string, time.Duration, error)) imageGate {
	g := &asyncGate{}
	g.s = asyncpull.New(img,
		asyncpull.WithClock(clk),
		asyncpull.WithLogger(log),
		asyncpull.WithMaxParallel(cfg.pullParallel),
		asyncpull.WithBackOff(cfg.scaled(ImagePullBackoff), cfg.scaled(300*time.Second)),
		asyncpull.WithNotify(wake),
		asyncpull.WithObserver(func(e asyncpull.Event) {
			switch e.Kind {
			case asyncpull.EventPullStarted:
				g.inflight.Add(1)
			case asyncpull.EventPullFinished:
				g.inflight.Add(-1)
				obs(e.Image, e.Duration, e.Err)
			}
		}))
	return g
}

func (g *asyncGate) ensure(_ context.Context, uid types.UID, image string, sb *runtimeapi.PodSandboxConfig) (bool, error) {
	// The interest lives as long as the pod: forget (Cancel) ends it.
	res := g.s.Ensure(context.Background(), asyncpull.Request{Image: image, PullPolicy: asyncpull.PullIfNotPresent,
		PodSandboxConfig: sb, PodUID: uid})
	switch res.State {
	case asyncpull.StatePresent:
		return true, nil
	case asyncpull.StateBackOff:
		return false, fmt.Errorf("%s: %s: %w", res.Reason, image, res.Err)
	case asyncpull.StateFailed:
		return false, fmt.Errorf("%s: %s: %w", res.Reason, image, res.Err)
	}
	return false, nil
}

func (g *asyncGate) inFlight() int        { return int(g.inflight.Load()) }
func (g *asyncGate) forget(uid types.UID) { g.s.Cancel(uid) }
func (g *asyncGate) close()               { g.s.Close() }
