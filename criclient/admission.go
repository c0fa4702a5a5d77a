package criclient

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// gate is the admission control of one Class: an in-flight bound, then a
// token bucket. The in-flight slot is taken first so that the rate governs
// when calls start, not when they join the queue.
type gate struct {
	slots  *semaphore.Weighted // nil: unbounded
	bucket *tokenBucket        // nil: no rate limit
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
