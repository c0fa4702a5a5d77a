package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The runtime check: the runtime's Status every runtimeCheckPeriod, and
// every runtimeRetryPeriod while it fails. A Status not answered within
// runtimeDownAfter means the runtime is down. The kubelet checks every
// 5 s; once per 30 s keeps an idle agent at one runtime call per 10 s at
// most, and a frozen runtime is still named within 40 s. All are scaled
// by Tuning.TimeScale.
const (
	runtimeCheckPeriod = 30 * time.Second
	runtimeRetryPeriod = time.Second
	runtimeDownAfter   = 10 * time.Second
)

// runtimeHealth is what the runtime check last learnt. The PLEG alone
// cannot tell a frozen runtime: an evented PLEG's stream stays open and
// silent, and a relist PLEG trips only after its 3-minute threshold, when
// it blames itself. So Healthy asks this first, and names the runtime.
type runtimeHealth struct {
	mu       sync.Mutex
	calling  time.Time                    // when the Status call in flight began, zero when none is
	lastErr  error                        // the last Status error, nil after an answer
	notReady *runtimeapi.RuntimeCondition // RuntimeReady false in the last answer
	// recovered is when the runtime answered ready after being down, zero
	// once the PLEG has been seen healthy since: until then an unhealthy
	// PLEG is the runtime's doing (its relists and events waited on it).
	recovered time.Time
}

// checkRuntime runs the runtime check until ctx ends.
func (a *Agent) checkRuntime(ctx context.Context) {
	for {
		next := a.cfg.scaled(runtimeCheckPeriod)
		ok, recovered := a.checkRuntimeOnce(ctx, a.cfg.scaled(runtimeDownAfter))
		if !ok {
			next = a.cfg.scaled(runtimeRetryPeriod)
		}
		if recovered {
			// A sync that failed while the runtime was down (a call that
			// timed out) would wait out its back-off; the runtime answers
			// now, so it is retried at once.
			for _, uid := range a.syncer.failedPods() {
				a.wake(uid)
			}
		}
		t := a.clock.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// checkRuntimeOnce makes one Status call, given at most timeout, and
// reports whether the runtime answered ready, and whether it did so after
// being down.
func (a *Agent) checkRuntimeOnce(ctx context.Context, timeout time.Duration) (ok, recovered bool) {
	h := &a.runtimeHealth
	h.mu.Lock()
	h.calling = a.clock.Now()
	h.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := a.runtime.status(cctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	now := a.clock.Now()
	// Down before this answer: the last check failed, or this one took
	// longer than the bound (runtimeDown named the runtime meanwhile).
	wasDown := h.lastErr != nil || h.notReady != nil || now.Sub(h.calling) > timeout
	h.calling = time.Time{}
	if ctx.Err() != nil {
		return true, false // shutting down: not the runtime's fault
	}
	if err != nil {
		h.lastErr = err
		return false, false
	}
	h.lastErr, h.notReady = nil, nil
	for _, c := range resp.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady && !c.GetStatus() {
			h.notReady = c
		}
	}
	if h.notReady == nil && wasDown {
		h.recovered = now
		return true, true
	}
	return h.notReady == nil, false
}

// runtimeRecovering says, while the PLEG is not healthy, whether that is
// because the runtime was down moments ago: the runtime answered ready
// again within the PLEG's health threshold and the PLEG has not been
// healthy since. plegOK clears it for good.
func (a *Agent) runtimeRecovering(plegOK bool) error {
	h := &a.runtimeHealth
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recovered.IsZero() {
		return nil
	}
	if plegOK || a.clock.Since(h.recovered) > a.cfg.plegThreshold() {
		h.recovered = time.Time{}
		return nil
	}
	return fmt.Errorf("agent: container runtime answering again for %v after it was down; the PLEG has not caught up yet", a.clock.Since(h.recovered).Round(time.Millisecond))
}

// runtimeDown says why the runtime is not a healthy one to run pods on,
// nil when it is: it reported RuntimeReady false, its last Status failed,
// or the Status in flight has not been answered for runtimeDownAfter.
func (a *Agent) runtimeDown() error {
	h := &a.runtimeHealth
	h.mu.Lock()
	defer h.mu.Unlock()
	bound := a.cfg.scaled(runtimeDownAfter)
	switch {
	case h.notReady != nil:
		return fmt.Errorf("agent: container runtime not ready: RuntimeReady=false reason %s: %s", h.notReady.GetReason(), h.notReady.GetMessage())
	case !h.calling.IsZero() && a.clock.Since(h.calling) > bound:
		return fmt.Errorf("agent: container runtime is not responding: its Status has not answered for %v (bound %v)", a.clock.Since(h.calling).Round(time.Millisecond), bound)
	case h.lastErr != nil:
		return fmt.Errorf("agent: container runtime is not responding: its last Status failed: %w", h.lastErr)
	}
	return nil
}
