package eventstream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/internal/backoff"
)

// Source is the part of a CRI runtime service the reader calls.
type Source interface {
	// GetContainerEvents streams events into ch and calls opened once the
	// stream is up. It must return once ctx ends.
	GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

// ErrChannelClosed is the end of a stream whose runtime closed the events
// channel without returning an error.
var ErrChannelClosed = errors.New("eventstream: the runtime closed the events channel")

// ErrEnded is the end of a stream whose GetContainerEvents returned nil.
var ErrEnded = errors.New("eventstream: the runtime ended the event stream")

// Config is what a Reader needs. Source, Clock and BackOff are required;
// the hooks are optional. The hooks run one at a time on the reader's
// goroutine, in order, and must not call Close.
type Config struct {
	// Source is the runtime.
	Source Source
	// Clock times the back-off and how long a stream lasted.
	Clock clock.Clock
	// BackOff is the reconnect delay: Initial after a failure, doubling to
	// Max. It starts again from Initial after a stream that delivered an
	// event or lasted at least Max.
	BackOff backoff.Policy
	// Jitter spreads each delay, a fraction in [0, 1).
	Jitter float64
	// Rand, when set, draws the jitter.
	Rand *rand.Rand
	// Buffer is the capacity of the events channel handed to the runtime.
	Buffer int
	// OnConnect runs when a stream opened: when the runtime called its
	// opened callback or, for one that never does, before its first event.
	OnConnect func()
	// OnEvent runs for each event of an open stream.
	OnEvent func(*runtimeapi.ContainerEventResponse)
	// OnEnd runs when a stream ended with why (never nil) and the delay
	// before the next attempt. It does not run for the end Close causes.
	OnEnd func(err error, retryIn time.Duration)
}

// Validate says why c cannot be used, or returns nil.
func (c *Config) Validate() error {
	switch {
	case c.Source == nil:
		return errors.New("source is nil")
	case c.Clock == nil:
		return errors.New("clock is nil")
	case c.Jitter < 0 || c.Jitter >= 1:
		return fmt.Errorf("jitter %v is outside [0, 1)", c.Jitter)
	case c.Buffer < 0:
		return fmt.Errorf("buffer %d is negative", c.Buffer)
	}
	return c.BackOff.Validate()
}

// Reader keeps one event stream open until Close. Make one with Start.
type Reader struct {
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start validates cfg and starts reading; the reader runs until Close or
// until ctx ends.
func Start(ctx context.Context, cfg Config) (*Reader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Reader{cfg: cfg, cancel: cancel, done: make(chan struct{})}
	go r.run(ctx)
	return r, nil
}

// Close stops the reader and waits for its goroutine and for the
// runtime's GetContainerEvents to return. It is idempotent and returns nil.
func (r *Reader) Close() error {
	r.once.Do(r.cancel)
	<-r.done
	return nil
}

func (r *Reader) run(ctx context.Context) {
	defer close(r.done)
	seq := backoff.Sequence{Policy: r.cfg.BackOff, Jitter: r.cfg.Jitter, Rand: r.cfg.Rand}
	for {
		began := r.cfg.Clock.Now()
		events, err := r.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if events > 0 || r.cfg.Clock.Since(began) >= r.cfg.BackOff.Max {
			seq.Reset()
		}
		wait := seq.Next()
		if r.cfg.OnEnd != nil {
			r.cfg.OnEnd(err, wait)
		}
		t := r.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// stream runs one stream to its end and returns how many events it handed
// on and why it ended. The events channel is never closed here: the
// runtime may close it, and a second close would panic.
func (r *Reader) stream(ctx context.Context) (int, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, r.cfg.Buffer)
	opened := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- call(sctx, r.cfg.Source, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) {
			select {
			case opened <- struct{}{}:
			default:
			}
		})
	}()
	connected := false
	connect := func() {
		if !connected {
			connected = true
			if r.cfg.OnConnect != nil {
				r.cfg.OnConnect()
			}
		}
	}
	n := 0
	handle := func(ev *runtimeapi.ContainerEventResponse) {
		connect()
		n++
		if r.cfg.OnEvent != nil {
			r.cfg.OnEvent(ev)
		}
	}
	for {
		select {
		case <-opened:
			connect()
		case ev, ok := <-ch:
			if !ok {
				cancel()
				err := <-done
				if err == nil || (errors.Is(err, context.Canceled) && ctx.Err() == nil) {
					err = ErrChannelClosed
				}
				return n, err
			}
			handle(ev)
		case err := <-done:
			for drained := false; !drained; {
				select {
				case ev, ok := <-ch:
					if !ok {
						drained = true
						break
					}
					handle(ev)
				default:
					drained = true
				}
			}
			if err == nil {
				err = ErrEnded
			}
			return n, err
		case <-ctx.Done():
			cancel()
			for {
				select {
				case _, ok := <-ch: // a runtime may block sending until it sees ctx
					if !ok {
						ch = nil
					}
				case err := <-done:
					return n, err
				}
			}
		}
	}
}

// call runs src.GetContainerEvents and turns a panic in it into its error.
func call(ctx context.Context, src Source, ch chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("eventstream: GetContainerEvents panicked: %v", p)
		}
	}()
	return src.GetContainerEvents(ctx, ch, opened)
}
