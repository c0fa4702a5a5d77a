package criclient

import (
	"context"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// tokenBucket is a golang.org/x/time/rate limiter driven by an injectable
// clock: it reserves with ReserveN(now) and sleeps on the clock's timer,
// instead of rate.Limiter.Wait (which reads the wall clock), so tests can
// step a fake clock. Reservations are served in arrival order; a waiter
// whose context ends cancels its reservation, giving the token back.
type tokenBucket struct {
	clock   clock.Clock
	limiter *rate.Limiter
}

func newTokenBucket(clk clock.Clock, qps float64, burst int) *tokenBucket {
	if burst < 1 {
		burst = 1
	}
	return &tokenBucket{clock: clk, limiter: rate.NewLimiter(rate.Limit(qps), burst)}
}

// wait blocks until a token is available or ctx ends.
func (b *tokenBucket) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := b.clock.Now()
	r := b.limiter.ReserveN(now, 1) // always OK: burst >= 1
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	t := b.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		r.CancelAt(b.clock.Now())
		return ctx.Err()
	}
}
