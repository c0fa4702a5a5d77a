package criclient

import (
	"context"

	"golang.org/x/sync/semaphore"
	"k8s.io/utils/clock"
)

// Gate is the admission control of one call class, the same one Dial sets
// up for each Class from WithAdmission: a FIFO in-flight bound, then a token
// bucket on an injectable clock. It is exported for servers that shape CRI
// traffic themselves, such as a proxy in front of a runtime, so that they
// apply Limits exactly as the client does. A Gate is safe for concurrent use.
type Gate struct{ g gate }

// NewGate returns a Gate enforcing l; the zero Limits admit every call at
// once. A nil clk means the real clock.
func NewGate(l Limits, clk clock.Clock) *Gate {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Gate{g: newGate(l, clk)}
}

// Acquire waits until the call may start, or returns ctx's error if ctx ends
// first (giving back what it took). The caller calls release once the call
// has returned.
func (g *Gate) Acquire(ctx context.Context) (release func(), err error) {
	return g.g.acquire(ctx)
}

// gate is the admission control of one Class: an in-flight bound, then a
// token bucket. The in-flight slot is taken first so that the rate governs
// when calls start, not when they join the queue.
type gate struct {
	slots  *semaphore.Weighted // nil: unbounded
	bucket *tokenBucket        // nil: no rate limit
}

func newGate(l Limits, clk clock.Clock) gate {
	var g gate
	if l.MaxInFlight > 0 {
		g.slots = semaphore.NewWeighted(int64(l.MaxInFlight))
	}
	if l.QPS > 0 {
		g.bucket = newTokenBucket(clk, l.QPS, l.Burst)
	}
	return g
}

func (g *gate) acquire(ctx context.Context) (release func(), err error) {
	if g.slots != nil {
		if err := g.slots.Acquire(ctx, 1); err != nil {
			return nil, err
		}
	}
	if g.bucket != nil {
		if err := g.bucket.wait(ctx); err != nil {
			g.release()
			return nil, err
		}
	}
	return g.release, nil
}

func (g *gate) release() {
	if g.slots != nil {
		g.slots.Release(1)
	}
}
