package runtimeview

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Subscription receives the runtime's container events, in the order the
// runtime sent them, from the moment Subscribe returned. It has its own
// buffer: a subscriber that does not keep up is ended with ErrOverflow and
// never slows the view, the runtime or other subscribers.
type Subscription struct {
	v   *View
	ch  chan *runtimeapi.ContainerEventResponse
	err error // guarded by v.mu; why the subscription ended
}

// Events returns the channel of events. It is closed when the subscription
// ends; Err then says why. The events are shared between subscribers: do
// not modify them.
func (s *Subscription) Events() <-chan *runtimeapi.ContainerEventResponse { return s.ch }

// Err returns why the subscription ended: ErrOverflow, an error wrapping
// ErrUpstreamLost, ErrClosed, or nil (still open, or ended by Close).
func (s *Subscription) Err() error {
	s.v.mu.Lock()
	defer s.v.mu.Unlock()
	return s.err
}

// Close ends the subscription. Idempotent.
func (s *Subscription) Close() error {
	s.v.mu.Lock()
	defer s.v.mu.Unlock()
	if _, ok := s.v.subs[s]; ok {
		s.v.endLocked(s, nil)
	}
	return nil
}

// Subscribe returns a subscription with a buffer of buffer events
// (DefaultBuffer when buffer <= 0). It waits, until ctx ends, for the
// runtime's event stream to be open, so that every event the runtime sends
// after Subscribe returns is delivered or the subscription ends with an
// error: there are no silent gaps. When ctx ends first, the error unwraps
// to ctx.Err() and has the gRPC code Canceled or DeadlineExceeded; a nil
// ctx gives an *ArgError, a closed view ErrClosed.
func (v *View) Subscribe(ctx context.Context, buffer int) (*Subscription, error) {
	if ctx == nil {
		return nil, nilCtx("Subscribe")
	}
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	for {
		v.mu.Lock()
		if v.closed {
			v.mu.Unlock()
			return nil, fmt.Errorf("runtimeview: Subscribe: %w", ErrClosed)
		}
		if v.upstreamOpen {
			s := &Subscription{v: v, ch: make(chan *runtimeapi.ContainerEventResponse, buffer)}
			v.subs[s] = struct{}{}
			v.mu.Unlock()
			return s, nil
		}
		wait := v.updated
		v.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, newContextError(ctx, "Subscribe: waiting for the runtime's event stream", nil)
		case <-v.life.Done():
			return nil, fmt.Errorf("runtimeview: Subscribe: %w", ErrClosed)
		}
	}
}

func (v *View) endLocked(s *Subscription, err error) {
	delete(v.subs, s)
	s.err = err
	close(s.ch)
}

// streamOpened makes Subscribe work again and relists: events of the time
// no stream was open are unknown.
func (v *View) streamOpened() {
	v.mu.Lock()
	v.upstreamOpen = true
	v.broadcastLocked()
	v.mu.Unlock()
	v.requestRelist()
}

// streamEnded ends every subscription (they would have a gap) and relists
// while the stream reconnects.
func (v *View) streamEnded(err error, retryIn time.Duration) {
	v.mu.Lock()
	v.upstreamOpen = false
	v.stats.StreamBreaks++
	for s := range v.subs {
		v.endLocked(s, fmt.Errorf("%w: %v", ErrUpstreamLost, err))
	}
	v.broadcastLocked()
	v.mu.Unlock()
	v.log.Debug("runtime event stream ended", zap.Error(err), zap.Duration("retryIn", retryIn))
	v.requestRelist()
}

func (v *View) apply(ev *runtimeapi.ContainerEventResponse) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return
	}
	v.stats.Events++
	now := v.nextLocked()
	ps := ev.GetPodSandboxStatus()
	sandboxID := ps.GetId()
	deleted := ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
	switch {
	case sandboxID != "" && ev.GetContainerId() == sandboxID && deleted:
		v.removeSandboxLocked(sandboxID, now)
	default:
		if sandboxID != "" {
			if _, gone := v.tombs[key{kindSandbox, sandboxID}]; !gone {
				v.sandboxes[sandboxID] = entry[*runtimeapi.PodSandbox]{item: sandboxFromStatus(ps), seen: now}
			}
		}
		for _, cs := range ev.GetContainersStatuses() {
			if cs.GetId() == "" || (deleted && cs.GetId() == ev.GetContainerId()) {
				continue
			}
			if _, gone := v.tombs[key{kindContainer, cs.GetId()}]; gone {
				continue
			}
			sbID := sandboxID
			if sbID == "" { // an event without the sandbox's status: keep what is known
				sbID = v.containers[cs.GetId()].item.GetPodSandboxId()
			}
			v.containers[cs.GetId()] = entry[*runtimeapi.Container]{item: containerFromStatus(cs, sbID), seen: now}
		}
		if deleted && ev.GetContainerId() != sandboxID {
			v.removeContainerLocked(ev.GetContainerId(), now)
		}
	}
	for s := range v.subs {
		select {
		case s.ch <- ev:
		default:
			v.stats.Overflows++
			v.endLocked(s, ErrOverflow)
		}
	}
}
