package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The runtime check, as the kubelet's updateRuntimeUp: the runtime's
// Status every runtimeCheckPeriod. A runtime that has not answered one for
// runtimeDownAfter is down. Both are scaled by Tuning.TimeScale.
const (
	runtimeCheckPeriod = 5 * time.Second
	runtimeDownAfter   = 10 * time.Second
)

// runtimeHealth is what the runtime check last learnt. The PLEG alone
// cannot tell a frozen runtime: an evented PLEG's stream stays open and
// silent, and a relist PLEG trips only after its 3-minute threshold, when
// it blames itself. So Healthy asks this first, and names the runtime.
type runtimeHealth struct {
	mu       sync.Mutex
	since    time.Time                    // when the check began (the grace before a first answer)
	lastOK   time.Time                    // the last Status answered with RuntimeReady true
	lastErr  error                        // the last Status error, nil after an answer
	notReady *runtimeapi.RuntimeCondition // RuntimeReady false in the last answer
}

// checkRuntime runs the runtime check until ctx ends.
func (a *Agent) checkRuntime(ctx context.Context) {
	period := a.cfg.scaled(runtimeCheckPeriod)
	a.runtimeHealth.mu.Lock()
	a.runtimeHealth.since = a.clock.Now()
	a.runtimeHealth.mu.Unlock()
	t := a.clock.NewTicker(period)
	defer t.Stop()
	for {
		a.checkRuntimeOnce(ctx, a.cfg.scaled(runtimeDownAfter))
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// checkRuntimeOnce makes one Status call, given at most timeout.
func (a *Agent) checkRuntimeOnce(ctx context.Context, timeout time.Duration) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := a.runtime.status(cctx)
	if ctx.Err() != nil {
		return // shutting down: not the runtime's fault
	}
	h := &a.runtimeHealth
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.lastErr = err
		return
	}
	h.lastErr, h.notReady = nil, nil
	for _, c := range resp.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady && !c.GetStatus() {
			h.notReady = c
		}
	}
	if h.notReady == nil {
		h.lastOK = a.clock.Now()
	}
}

// runtimeDown says why the runtime is not a healthy one to run pods on,
// nil when it is: it reported RuntimeReady false, or no Status has been
// answered ready for runtimeDownAfter.
func (a *Agent) runtimeDown() error {
	h := &a.runtimeHealth
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.IsZero() {
		return nil // not started
	}
	if h.notReady != nil {
		return fmt.Errorf("agent: container runtime not ready: RuntimeReady=false reason %s: %s", h.notReady.GetReason(), h.notReady.GetMessage())
	}
	last := h.lastOK
	if last.IsZero() {
		last = h.since
	}
	bound := a.cfg.scaled(runtimeDownAfter)
	if age := a.clock.Since(last); age > bound {
		why := "no answer"
		if h.lastErr != nil {
			why = "last error: " + h.lastErr.Error()
		}
		return fmt.Errorf("agent: container runtime is not responding: its Status has not answered for %v (bound %v; %s)", age.Round(time.Millisecond), bound, why)
	}
	return nil
}
