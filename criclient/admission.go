package criclient

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/typednil"
)

// Gate is the admission control of one call class, the same one Dial sets
// up for each Class from WithAdmission: a FIFO in-flight bound, then a token
// bucket on an injectable clock. It is exported for servers that shape CRI
// traffic themselves, such as a proxy in front of a runtime, so that they
// apply Limits exactly as the client does. A Gate is safe for concurrent use.
//
// The zero Gate works: it is the Gate of the zero Limits, admitting every
// call at once, as NewGate(Limits{}, nil) does.
type Gate struct{ g gate }

// NewGate returns a Gate enforcing limits; the zero Limits admit every call
// at once. A nil clk means the real clock. It refuses, with a *ConfigError,
// the limits WithAdmission refuses (a negative, NaN or infinite QPS, a
// negative Burst or MaxInFlight; Option "limits") and a typed-nil clk
// (Option "clk"), such as a nil *FakeClock, which is a mistake rather than
// a request for the real clock.
func NewGate(limits Limits, clk clock.Clock) (*Gate, error) {
	if reason := limits.problem(); reason != "" {
		return nil, &ConfigError{Option: "limits", Reason: reason}
	}
	if clk == nil {
		clk = clock.RealClock{}
	} else if typednil.Is(clk) {
		return nil, &ConfigError{Option: "clk", Reason: "must not be a typed nil (pass nil for the real clock)"}
	}
	return &Gate{g: newGate(limits, clk)}, nil
}

// Acquire waits until the call may start, or returns ctx's error if ctx ends
// first (giving back what it took). The caller calls release once the call
// has returned; calling it again does nothing. A nil ctx, or a nil *Gate,
// is an *ArgError.
func (g *Gate) Acquire(ctx context.Context) (release func(), err error) {
	if g == nil {
		return nil, &ArgError{Method: "Acquire", Arg: "Gate", Reason: "must not be nil"}
	}
	if ctx == nil {
		return nil, &ArgError{Method: "Acquire", Arg: "ctx", Reason: "must not be nil"}
	}
	rel, err := g.g.acquire(ctx)
	if err != nil {
		return nil, err
	}
	var released atomic.Bool
	return func() {
		if released.CompareAndSwap(false, true) {
			rel()
		}
	}, nil
}

// gate is the admission control of one Class: an in-flight bound, then a
// token bucket. The in-flight slot is taken first so that the rate governs
// when calls start, not when they join the queue. The zero gate admits
// everything.
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
