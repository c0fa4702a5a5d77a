package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// eventedPLEG uses the CRI event stream as hints: each event wakes the
// worker of its pod, which inspects that pod on demand (the direction
// upstream took in 1.36). A relist runs as a safety net, every
// slowPeriod while the stream is up and every fastPeriod while it is down;
// the stream is re-opened forever with a capped back-off, never given up.
type eventedPLEG struct {
	rt         cri.RuntimeService
	clock      clock.WithTickerAndDelayedExecution
	log        *zap.Logger
	wake       func(types.UID)
	relist     *relister
	fastPeriod time.Duration
	slowPeriod time.Duration
	retryMax   time.Duration

	mu        sync.Mutex
	connected bool
	reconnect int
	events    int64
}

func (e *eventedPLEG) period() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.connected {
		return e.slowPeriod
	}
	return e.fastPeriod
}

func (e *eventedPLEG) setConnected(v bool) {
	e.mu.Lock()
	changed := e.connected != v
	e.connected = v
	if v {
		e.reconnect++
	}
	e.mu.Unlock()
	if changed {
		e.relist.kick() // catch up on whatever the stream missed, and re-pace
	}
}

func (e *eventedPLEG) mode() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.connected {
		return "evented"
	}
	return "relist"
}

// healthy: the relist safety net must be alive in both modes (a runtime
// that stalls every call stalls it); it is what makes the report honest.
func (e *eventedPLEG) healthy() (bool, error) { return e.relist.healthy() }

func (e *eventedPLEG) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.relist.run(ctx)
	}()
	delay := e.fastPeriod / 4
	for ctx.Err() == nil {
		start := e.clock.Now()
		err := e.stream(ctx)
		e.setConnected(false)
		if ctx.Err() != nil {
			break
		}
		if e.clock.Since(start) > e.retryMax {
			delay = e.fastPeriod / 4 // it was up for a while: retry quickly
		}
		e.log.Info("container event stream ended, relisting until it is back", zap.Error(err), zap.Duration("retryIn", delay))
		t := e.clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
		}
		if delay *= 2; delay > e.retryMax {
			delay = e.retryMax
		}
	}
	wg.Wait()
}

func (e *eventedPLEG) stream(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, 1000)
	errc := make(chan error, 1)
	go func() {
		errc <- e.rt.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) {
			e.setConnected(true)
		})
	}()
	for {
		select {
		case ev := <-ch:
			e.handle(ev)
		case err := <-errc:
			for {
				select { // drain what was delivered before the end
				case ev := <-ch:
					e.handle(ev)
				default:
					if err == nil {
						err = errors.New("stream closed")
					}
					return err
				}
			}
		}
	}
}

func (e *eventedPLEG) handle(ev *runtimeapi.ContainerEventResponse) {
	e.mu.Lock()
	e.events++
	e.mu.Unlock()
	uid := types.UID(ev.GetPodSandboxStatus().GetMetadata().GetUid())
	if uid == "" {
		uid = types.UID(ev.GetPodSandboxStatus().GetLabels()[labelPodUID])
	}
	if uid == "" {
		// Not attributable to a pod: let a relist sort it out.
		e.relist.kick()
		return
	}
	e.wake(uid)
}
