package crisim

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
)

type rateFault struct {
	rate float64
	code codes.Code
}

// faultState is guarded by Runtime.faultMu.
type faultState struct {
	failNext     map[string][]error
	errorRate    map[string]rateFault
	hangNext     map[string]int
	stallUntil   time.Time
	stallChanged chan struct{} // closed and replaced by every Stall
}

func (f *faultState) init() {
	f.failNext = map[string][]error{}
	f.errorRate = map[string]rateFault{}
	f.hangNext = map[string]int{}
	f.stallChanged = make(chan struct{})
}

// FailNext makes the next n calls of method fail with err, in addition to
// any already queued. err is returned as is, so a status error
// (status.Error(codes.Unavailable, ...)) keeps its code over gRPC; a nil err
// means codes.Unavailable. n == 0 clears the queue for method; a negative n
// is an *ArgError and changes nothing.
func (r *Runtime) FailNext(method string, n int, err error) error {
	const name = "FailNext"
	if !r.ready() {
		return errNotNew(name)
	}
	if n < 0 {
		return &ArgError{Method: name, Arg: "n", Reason: fmt.Sprintf("%d is negative", n)}
	}
	if err == nil {
		err = newError(method, ErrInjected, codes.Unavailable, "FailNext")
	}
	r.faultMu.Lock()
	defer r.faultMu.Unlock()
	if n == 0 {
		delete(r.faults.failNext, method)
		return nil
	}
	for range n {
		r.faults.failNext[method] = append(r.faults.failNext[method], err)
	}
	return nil
}

// SetErrorRate makes each call of method fail with code with probability
// rate (0..1), drawn from the seeded source. rate == 0 turns it off; a rate
// below 0, above 1 or NaN is an *ArgError and changes nothing.
func (r *Runtime) SetErrorRate(method string, rate float64, code codes.Code) error {
	const name = "SetErrorRate"
	if !r.ready() {
		return errNotNew(name)
	}
	if !(rate >= 0 && rate <= 1) { // also refuses NaN
		return &ArgError{Method: name, Arg: "rate", Reason: fmt.Sprintf("%v is not in [0, 1]", rate)}
	}
	r.faultMu.Lock()
	defer r.faultMu.Unlock()
	if rate == 0 {
		delete(r.faults.errorRate, method)
		return nil
	}
	r.faults.errorRate[method] = rateFault{rate: rate, code: code}
	return nil
}

// HangNext makes the next n calls of method block until their context ends
// (or the runtime closes); they then fail with codes.Canceled or
// codes.DeadlineExceeded, as a real hung runtime looks to a client with a
// timeout. n == 0 clears it; a negative n is an *ArgError and changes
// nothing.
func (r *Runtime) HangNext(method string, n int) error {
	const name = "HangNext"
	if !r.ready() {
		return errNotNew(name)
	}
	if n < 0 {
		return &ArgError{Method: name, Arg: "n", Reason: fmt.Sprintf("%d is negative", n)}
	}
	r.faultMu.Lock()
	defer r.faultMu.Unlock()
	if n == 0 {
		delete(r.faults.hangNext, method)
		return nil
	}
	r.faults.hangNext[method] += n
	return nil
}

// Stall freezes the runtime for d from now on the runtime clock: every call
// that arrives before the window ends (and every call already waiting in it)
// blocks until the window ends or its context ends, then proceeds normally.
// A later Stall replaces the window; Stall(0) ends it at once. A negative d
// is an *ArgError and changes nothing.
func (r *Runtime) Stall(d time.Duration) error {
	const name = "Stall"
	if !r.ready() {
		return errNotNew(name)
	}
	if d < 0 {
		return &ArgError{Method: name, Arg: "d", Reason: fmt.Sprintf("%v is negative", d)}
	}
	until := r.clock.Now().Add(d)
	r.faultMu.Lock()
	r.faults.stallUntil = until
	close(r.faults.stallChanged)
	r.faults.stallChanged = make(chan struct{})
	r.faultMu.Unlock()
	return nil
}

func (r *Runtime) waitStall(ctx context.Context, method string) error {
	for {
		r.faultMu.Lock()
		until, changed := r.faults.stallUntil, r.faults.stallChanged
		r.faultMu.Unlock()
		if until.IsZero() {
			return nil
		}
		now := r.clock.Now()
		if !now.Before(until) {
			return nil
		}
		if err := r.sleepOrWake(ctx, method, until.Sub(now), changed); err != nil {
			return err
		}
	}
}

// injected applies HangNext, FailNext and SetErrorRate to one call.
func (r *Runtime) injected(ctx context.Context, method string) error {
	r.faultMu.Lock()
	hang := r.faults.hangNext[method] > 0
	if hang {
		r.faults.hangNext[method]--
		if r.faults.hangNext[method] == 0 {
			delete(r.faults.hangNext, method)
		}
	}
	var failErr error
	if !hang {
		if q := r.faults.failNext[method]; len(q) > 0 {
			failErr = q[0]
			if len(q) == 1 {
				delete(r.faults.failNext, method)
			} else {
				r.faults.failNext[method] = q[1:]
			}
		}
	}
	rate, hasRate := r.faults.errorRate[method]
	r.faultMu.Unlock()

	switch {
	case hang:
		select {
		case <-ctx.Done():
			return contextError(method, ctx.Err())
		case <-r.done:
			return errClosed(method)
		}
	case failErr != nil:
		return failErr
	case hasRate && r.random() < rate.rate:
		return newError(method, ErrInjected, rate.code, "SetErrorRate %.3g", rate.rate)
	}
	return nil
}
