package asyncpull

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
)

// backoffKey identifies a back-off: one per image and credentials ("" when anonymous or under
// ShareCredentials).
type backoffKey struct{ image, cred string }

type backoffEntry struct {
	delay time.Duration
	until time.Time
	last  time.Time
	err   error
	// waiting holds the pods whose request met this back-off (Ensure answered StateBackOff),
	// each with the context of its latest such request. They are woken when the back-off
	// ends; a pod whose context is done by then is not.
	waiting map[types.UID]context.Context
}

// nextBackOffLocked records a failure: 10s, 20s, 40s ... capped, restarting from the initial
// delay when the previous failure is older than 2*max (internal/backoff, the kubelet's rule).
func (s *Scheduler) nextBackOffLocked(k backoffKey, now time.Time, err error) time.Duration {
	b := s.backoff[k]
	if b != nil && len(b.waiting) > 0 && !now.Before(b.until) {
		// Pods that waited for the previous back-off are owed their wake-up before it is
		// replaced, so that a retry failing before the dispatcher saw the expiry loses none.
		s.wakeBackOffLocked(k, b, "", now)
	}
	if b == nil {
		b = &backoffEntry{}
		s.backoff[k] = b
	}
	b.delay = s.delays.Fail(k, now)
	b.until, b.last, b.err = now.Add(b.delay), now, err
	return b.delay
}

// awaitBackOffLocked registers pod to be woken when b ends. Anonymous requests have nobody to
// wake. Only the first registration on an entry kicks the dispatcher: later ones expire at the
// same instant, which its timer already covers.
func (s *Scheduler) awaitBackOffLocked(ctx context.Context, b *backoffEntry, pod types.UID) {
	if pod == "" || ctx.Err() != nil {
		return
	}
	if b.waiting == nil {
		b.waiting = map[types.UID]context.Context{}
	}
	first := len(b.waiting) == 0
	b.waiting[pod] = ctx
	if first {
		s.kickDispatch()
	}
}

// expireBackOffsLocked wakes the pods waiting for back-offs that have ended and returns when
// the next awaited one ends (zero: none is awaited), for the dispatcher's single timer. It
// scans every entry: there is one per failing image and credentials, idle ones are dropped,
// and the scan runs only when the dispatcher does.
func (s *Scheduler) expireBackOffsLocked(now time.Time) time.Time {
	var next time.Time
	for k, b := range s.backoff {
		switch {
		case len(b.waiting) == 0:
		case now.Before(b.until):
			next = minTime(next, b.until)
		default:
			s.wakeBackOffLocked(k, b, "", now)
		}
	}
	return next
}

// wakeBackOffLocked ends b's waiting: every pod still interested, except except (the pod whose
// request is starting the retry), is marked "retry due" and woken like for a completed pull.
func (s *Scheduler) wakeBackOffLocked(k backoffKey, b *backoffEntry, except types.UID, now time.Time) {
	if s.closed {
		return // Close promises no wake-up after it
	}
	woken := 0
	for pod, ctx := range b.waiting {
		if pod == except || ctx.Err() != nil {
			continue
		}
		m := s.retryDue[pod]
		if m == nil {
			m = map[backoffKey]time.Time{}
			s.retryDue[pod] = m
		}
		m[k] = now
		s.markDirtyLocked(pod)
		woken++
	}
	b.waiting = nil
	if woken > 0 {
		cred := k.cred
		if cred == "" {
			cred = "none"
		}
		s.log.Debug("image back-off expired", zap.String("image", k.image), zap.String("cred", cred), zap.Int("woken", woken))
	}
}

// forgetRetryDueLocked drops pod's "retry due" mark for k: the pod is asking again.
func (s *Scheduler) forgetRetryDueLocked(pod types.UID, k backoffKey) {
	if m := s.retryDue[pod]; m != nil {
		delete(m, k)
		if len(m) == 0 {
			delete(s.retryDue, pod)
		}
	}
}

func (s *Scheduler) backOffResult(image string, b *backoffEntry) Result {
	return Result{
		State: StateBackOff, Image: image, Reason: ReasonImagePullBackOff, BackOffUntil: b.until,
		Err: &BackOffError{Image: image, Until: b.until, Err: b.err},
	}
}

// BackOffError is the error of a request refused because an earlier pull of the image (with
// the same credentials) failed recently. It wraps that failure.
type BackOffError struct {
	// Image is the normalised reference.
	Image string
	// Until is when the next pull may start.
	Until time.Time
	// Err is the last pull error (a *PullError).
	Err error
}

// Error implements error.
func (e *BackOffError) Error() string {
	return fmt.Sprintf("back-off pulling image %q until %s: %v", e.Image, e.Until.Format(time.RFC3339), e.Err)
}

// Unwrap returns the last pull error.
func (e *BackOffError) Unwrap() error { return e.Err }

var _ error = (*BackOffError)(nil)
