package eventstream_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/internal/backoff"
	"github.com/syncpod/syncpod/internal/eventstream"
)

// call is one GetContainerEvents call, driven by the test.
type call struct {
	ctx    context.Context
	ch     chan *runtimeapi.ContainerEventResponse
	opened func(runtimeapi.RuntimeService_GetContainerEventsClient)
	ret    chan error
}

type fakeSource struct {
	calls chan *call
	panic bool
}

func (s *fakeSource) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	if s.panic {
		s.panic = false
		panic("runtime bug")
	}
	c := &call{ctx: ctx, ch: ch, opened: opened, ret: make(chan error)}
	s.calls <- c
	select {
	case err := <-c.ret:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// timerClock tells the test when the reader set a timer, so that the test
// steps the clock only once the reader waits on it.
type timerClock struct {
	*clocktesting.FakeClock
	timers chan struct{}
}

func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.timers <- struct{}{}
	return t
}

type end struct {
	err     error
	retryIn time.Duration
}

type harness struct {
	src    *fakeSource
	clk    *timerClock
	hooks  chan string // "connect" or an event's container id
	ends   chan end
	reader *eventstream.Reader
}

func start(t *testing.T, src *fakeSource) *harness {
	t.Helper()
	h := &harness{src: src, clk: &timerClock{clocktesting.NewFakeClock(time.Unix(1000, 0)), make(chan struct{}, 100)}, hooks: make(chan string, 100), ends: make(chan end, 100)}
	r, err := eventstream.Start(context.Background(), eventstream.Config{
		Source:    src,
		Clock:     h.clk,
		BackOff:   backoff.Policy{Initial: time.Second, Max: 4 * time.Second},
		Rand:      rand.New(rand.NewPCG(1, 2)),
		OnConnect: func() { h.hooks <- "connect" },
		OnEvent:   func(ev *runtimeapi.ContainerEventResponse) { h.hooks <- ev.GetContainerId() },
		OnEnd:     func(err error, d time.Duration) { h.ends <- end{err, d} },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.reader = r
	t.Cleanup(func() { _ = r.Close() })
	return h
}

func (h *harness) expect(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		if got := <-h.hooks; got != w {
			t.Fatalf("hook %q, want %q", got, w)
		}
	}
}

// retry waits for the stream's end and for the reader's back-off timer,
// then fires it.
func (h *harness) retry(t *testing.T) end {
	t.Helper()
	e := <-h.ends
	<-h.clk.timers // the reader's back-off timer is set
	h.clk.Step(e.retryIn)
	return e
}

func ev(id string) *runtimeapi.ContainerEventResponse {
	return &runtimeapi.ContainerEventResponse{ContainerId: id}
}

func TestChannelClosedReconnects(t *testing.T) {
	h := start(t, &fakeSource{calls: make(chan *call)})
	c := <-h.src.calls
	c.opened(nil)
	h.expect(t, "connect")
	c.ch <- ev("a")
	close(c.ch) // allowed by the CRI contract: the stream is over
	h.expect(t, "a")
	e := h.retry(t)
	if !errors.Is(e.err, eventstream.ErrChannelClosed) {
		t.Fatalf("end: %v", e.err)
	}
	c = <-h.src.calls
	c.ch <- ev("b") // a runtime that never calls opened
	h.expect(t, "connect", "b")
}

func TestErrorsBackOff(t *testing.T) {
	h := start(t, &fakeSource{calls: make(chan *call)})
	boom := errors.New("unavailable")
	var waits []time.Duration
	for range 4 {
		c := <-h.src.calls
		c.ret <- boom
		e := h.retry(t)
		if !errors.Is(e.err, boom) {
			t.Fatalf("end: %v", e.err)
		}
		waits = append(waits, e.retryIn)
	}
	for i, w := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		if waits[i] != w {
			t.Errorf("wait %d = %v, want %v (no jitter)", i, waits[i], w)
		}
	}
	// A stream that delivered an event starts the back-off again.
	c := <-h.src.calls
	c.ch <- ev("x")
	h.expect(t, "connect", "x")
	c.ret <- nil
	if e := h.retry(t); !errors.Is(e.err, eventstream.ErrEnded) || e.retryIn != time.Second {
		t.Errorf("after a working stream: %v after %v", e.err, e.retryIn)
	}
	<-h.src.calls
}

func TestPanicEndsStream(t *testing.T) {
	h := start(t, &fakeSource{calls: make(chan *call), panic: true})
	if e := h.retry(t); e.err == nil || !strings.Contains(e.err.Error(), "panicked") {
		t.Fatalf("end: %v", e.err)
	}
	<-h.src.calls
}

func TestCloseWhileStreaming(t *testing.T) {
	h := start(t, &fakeSource{calls: make(chan *call)})
	c := <-h.src.calls
	c.opened(nil)
	h.expect(t, "connect")
	if err := h.reader.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.reader.Close(); err != nil {
		t.Fatal(err)
	}
	if c.ctx.Err() == nil {
		t.Error("the stream's context outlived Close")
	}
	select {
	case e := <-h.ends:
		t.Errorf("OnEnd ran for Close: %v", e.err)
	default:
	}
}

func TestCloseWhileBackingOff(t *testing.T) {
	h := start(t, &fakeSource{calls: make(chan *call)})
	(<-h.src.calls).ret <- errors.New("down")
	<-h.ends
	if err := h.reader.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	ok := eventstream.Config{Source: &fakeSource{}, Clock: clocktesting.NewFakeClock(time.Now()), BackOff: backoff.Policy{Initial: 1, Max: 1}}
	for name, mut := range map[string]func(*eventstream.Config){
		"no source":       func(c *eventstream.Config) { c.Source = nil },
		"no clock":        func(c *eventstream.Config) { c.Clock = nil },
		"negative buffer": func(c *eventstream.Config) { c.Buffer = -1 },
		"jitter of one":   func(c *eventstream.Config) { c.Jitter = 1 },
		"zero back-off":   func(c *eventstream.Config) { c.BackOff = backoff.Policy{} },
		"negative jitter": func(c *eventstream.Config) { c.Jitter = -0.1 },
	} {
		c := ok
		mut(&c)
		if r, err := eventstream.Start(context.Background(), c); err == nil {
			_ = r.Close()
			t.Errorf("%s: Start accepted it", name)
		}
	}
}
