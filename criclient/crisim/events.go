package crisim

import (
	"context"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// eventHub fans events out to subscribers. Its fields are guarded by
// Runtime.mu (publish happens in the same critical section as the state
// change, so every subscriber sees events in state order).
type eventHub struct {
	buffer   int
	subs     map[*subscriber]struct{}
	dropNext int           // DropNextEvents budget
	cutAfter int           // CutEventStreamsAfter for new streams; < 0: off
	dropped  int64         // lost to full subscriber buffers
	skipped  int64         // lost to DropNextEvents
	sent     int64         // put in subscriber buffers
	changed  chan struct{} // closed and replaced when subs changes
	lastAt   int64         // CreatedAt of the last event published
}

func (h *eventHub) init(buffer int) {
	h.buffer = buffer
	h.subs = map[*subscriber]struct{}{}
	h.cutAfter = -1
	h.changed = make(chan struct{})
}

func (h *eventHub) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

type subscriber struct {
	ch    chan *runtimeapi.ContainerEventResponse
	wake  chan struct{} // 1-buffered: the cut limit changed
	limit atomic.Int64  // events this stream may still deliver before it is cut; < 0: no limit
	sent  atomic.Int64  // events delivered since limit was set
}

// publishLocked sends ev to every subscriber without blocking. r.mu must be
// held. A subscriber whose buffer is full loses ev (as with containerd): the
// runtime never waits for a slow reader.
func (r *Runtime) publishLocked(ev *runtimeapi.ContainerEventResponse) {
	h := &r.events
	// Timestamps are read before r.mu is taken, so two racing mutations may
	// publish out of clock order; keep CreatedAt non-decreasing in stream
	// order, as a consumer that keeps the newest status relies on.
	if ev.CreatedAt < h.lastAt {
		ev.CreatedAt = h.lastAt
	}
	h.lastAt = ev.CreatedAt
	if h.dropNext > 0 {
		h.dropNext--
		h.skipped++
		return
	}
	for s := range h.subs {
		select {
		case s.ch <- ev:
			h.sent++
		default:
			h.dropped++
		}
	}
}

// GetContainerEvents streams container and sandbox events (CREATED, STARTED,
// STOPPED, DELETED) as containerd 2.x does: each carries the pod's
// PodSandboxStatus and the statuses of all containers in the pod; sandbox
// events carry the sandbox id as container_id. Each stream has its own buffer
// (WithEventBuffer); events published before a stream subscribes are not
// replayed. CreatedAt never decreases along a stream.
func (r *Runtime) GetContainerEvents(req *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	const method = "GetContainerEvents"
	if !r.ready() {
		return errNotNew(method)
	}
	if stream == nil {
		return errInvalid(method, "nil stream")
	}
	ctx := stream.Context()
	a, err := r.admit(ctx, method, kindStream)
	if err != nil {
		return err
	}
	defer a.leave()

	s := &subscriber{
		ch:   make(chan *runtimeapi.ContainerEventResponse, r.events.buffer),
		wake: make(chan struct{}, 1),
	}
	r.mu.Lock()
	if r.closed() {
		r.mu.Unlock()
		return errClosed(method)
	}
	s.limit.Store(int64(r.events.cutAfter))
	r.events.subs[s] = struct{}{}
	r.events.notifyLocked()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.events.subs, s)
		r.events.notifyLocked()
		r.mu.Unlock()
	}()

	cut := func() bool {
		l := s.limit.Load()
		return l >= 0 && s.sent.Load() >= l
	}
	for {
		if cut() {
			return newError(method, ErrInjected, codes.Unavailable, "event stream cut by CutEventStreamsAfter")
		}
		select {
		case ev := <-s.ch:
			if err := stream.Send(ev); err != nil {
				return err
			}
			s.sent.Add(1)
		case <-s.wake:
		case <-ctx.Done():
			return contextError(method, ctx.Err())
		case <-r.done:
			return errClosed(method)
		}
	}
}

// CutEventStreamsAfter makes every event stream, open now or opened later,
// end with codes.Unavailable after it has delivered n more events (n == 0:
// open streams end now and new ones at once). n < 0 turns it off. It fails
// only on a Runtime that New did not make.
func (r *Runtime) CutEventStreamsAfter(n int) error {
	if !r.ready() {
		return errNotNew("CutEventStreamsAfter")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n < 0 {
		n = -1
	}
	r.events.cutAfter = n
	for s := range r.events.subs {
		s.limit.Store(int64(n))
		s.sent.Store(0)
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// DropNextEvents makes the runtime lose its next n events: no subscriber
// receives them (see EventsLost). n == 0 cancels pending drops; a negative n
// is an *ArgError and changes nothing.
func (r *Runtime) DropNextEvents(n int) error {
	const name = "DropNextEvents"
	if !r.ready() {
		return errNotNew(name)
	}
	if n < 0 {
		return &ArgError{Method: name, Arg: "n", Reason: fmt.Sprintf("%d is negative", n)}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events.dropNext = n
	return nil
}

// Subscribers returns the number of open GetContainerEvents streams. Tests
// wait for it before acting, so the stream sees the events.
func (r *Runtime) Subscribers() int {
	if !r.ready() {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.events.subs)
}

// WaitSubscribers blocks until at least n GetContainerEvents streams are
// open, or ctx ends (returning its error) or the runtime closes (ErrClosed).
// Call it after opening a stream and before acting, so the stream sees the
// events. A nil ctx or a negative n is an *ArgError.
func (r *Runtime) WaitSubscribers(ctx context.Context, n int) error {
	const name = "WaitSubscribers"
	switch {
	case !r.ready():
		return errNotNew(name)
	case ctx == nil:
		return &ArgError{Method: name, Arg: "ctx", Reason: "must not be nil"}
	case n < 0:
		return &ArgError{Method: name, Arg: "n", Reason: fmt.Sprintf("%d is negative", n)}
	}
	for {
		r.mu.RLock()
		have, changed := len(r.events.subs), r.events.changed
		r.mu.RUnlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("crisim: wait for %d subscribers (have %d): %w", n, have, ctx.Err())
		case <-r.done:
			return fmt.Errorf("crisim: wait for %d subscribers: %w", n, ErrClosed)
		}
	}
}

// EventsSent returns how many event deliveries were made: one per event
// and subscriber whose buffer took it. A single consumer that has received
// as many events has every event published so far: a test stepping a fake
// clock compares the two before the next step.
func (r *Runtime) EventsSent() int64 {
	if !r.ready() {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.events.sent
}

// EventsLost returns how many event deliveries were lost: to full
// subscriber buffers (one per subscriber that missed an event) and to
// DropNextEvents (one per event).
func (r *Runtime) EventsLost() (bufferFull, dropped int64) {
	if !r.ready() {
		return 0, 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.events.dropped, r.events.skipped
}
