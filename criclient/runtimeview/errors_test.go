package runtimeview_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/runtimeview"
)

// stubSource is a runtime whose Lists answer at once (empty, or listErr),
// whose status calls never answer, and whose event stream opens only when
// openStream is set.
type stubSource struct {
	listErr    error
	openStream bool
}

var _ runtimeview.Source = (*stubSource)(nil)

func (s *stubSource) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return nil, s.listErr
}

func (s *stubSource) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return nil, s.listErr
}

func (s *stubSource) PodSandboxStatus(ctx context.Context, _ string, _ bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *stubSource) ContainerStatus(ctx context.Context, _ string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *stubSource) GetContainerEvents(ctx context.Context, _ chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	if s.openStream && opened != nil {
		opened(nil)
	}
	<-ctx.Done()
	return ctx.Err()
}

// handCtx is a context the test ends by hand with the error it picks. It
// tells on selects: selecting reaches Done, so selecting closes the
// channel returned by waiting(n) at the n-th call.
type handCtx struct {
	context.Context // Background: no deadline, no values

	mu    sync.Mutex
	done  chan struct{}
	err   error
	calls int
	at    map[int]chan struct{}
}

func newHandCtx() *handCtx {
	return &handCtx{Context: context.Background(), done: make(chan struct{}), at: map[int]chan struct{}{}}
}

func (c *handCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if ch, ok := c.at[c.calls]; ok {
		close(ch)
	}
	return c.done
}

func (c *handCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// waiting returns a channel closed once Done has been called n times.
func (c *handCtx) waiting(n int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.calls >= n {
		close(ch)
	} else {
		c.at[n] = ch
	}
	return ch
}

func (c *handCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
	close(c.done)
}

func newStubView(t *testing.T, src *stubSource, opts ...runtimeview.Option) *runtimeview.View {
	t.Helper()
	opts = append([]runtimeview.Option{
		runtimeview.WithClock(clocktesting.NewFakeClock(time.Now())),
		runtimeview.WithMaxStaleness(time.Hour),
		runtimeview.WithStatusTimeout(time.Hour),
	}, opts...)
	v, err := runtimeview.New(src, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	waitFor(t, "the first relist", func() bool { return v.Stats().Relists >= 1 })
	return v
}

// New rejects a nil source and invalid option values with *ConfigError,
// before starting anything (goleak checks nothing was left running).
func TestNewRejectsBadConfig(t *testing.T) {
	src := &stubSource{}
	for _, tc := range []struct {
		name   string
		src    runtimeview.Source
		opts   []runtimeview.Option
		option string
	}{
		{"nil source", nil, nil, "src"},
		{"typed nil source", (*criclient.Client)(nil), nil, "src"},
		{"zero relist period", src, []runtimeview.Option{runtimeview.WithRelistPeriod(0)}, "WithRelistPeriod"},
		{"negative relist period", src, []runtimeview.Option{runtimeview.WithRelistPeriod(-time.Second)}, "WithRelistPeriod"},
		{"zero staleness", src, []runtimeview.Option{runtimeview.WithMaxStaleness(0)}, "WithMaxStaleness"},
		{"negative status timeout", src, []runtimeview.Option{runtimeview.WithStatusTimeout(-1)}, "WithStatusTimeout"},
		{"nil clock", src, []runtimeview.Option{runtimeview.WithClock(nil)}, "WithClock"},
		{"typed nil clock", src, []runtimeview.Option{runtimeview.WithClock((*clocktesting.FakeClock)(nil))}, "WithClock"},
		{"nil logger", src, []runtimeview.Option{runtimeview.WithLogger(nil)}, "WithLogger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := runtimeview.New(tc.src, tc.opts...)
			var ce *runtimeview.ConfigError
			if v != nil || !errors.As(err, &ce) || ce.Option != tc.option {
				if v != nil {
					_ = v.Close()
				}
				t.Fatalf("New: %v, %v; want a *ConfigError for %s", v, err, tc.option)
			}
		})
	}
}

// Reads and Subscribe with a nil context fail with an *ArgError.
func TestNilContext(t *testing.T) {
	v := newStubView(t, &stubSource{openStream: true})
	var nilCtx context.Context
	if _, err := v.ListPodSandbox(nilCtx, nil); !isNilCtx(err) {
		t.Errorf("ListPodSandbox(nil): %v", err)
	}
	if _, err := v.ListContainers(nilCtx, nil); !isNilCtx(err) {
		t.Errorf("ListContainers(nil): %v", err)
	}
	if sub, err := v.Subscribe(nilCtx, 1); !isNilCtx(err) {
		if sub != nil {
			sub.Close()
		}
		t.Errorf("Subscribe(nil): %v", err)
	}
}

// A read waiting for a confirmation that never comes ends with its
// context: the error unwraps to the context's error and carries the gRPC
// code a server gives it.
func TestReadEndsWithContextWhileConfirming(t *testing.T) {
	for _, tc := range []struct {
		ctxErr error
		code   codes.Code
	}{
		{context.Canceled, codes.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			v := newStubView(t, &stubSource{})
			v.SandboxChanged("sb1") // its status call never answers
			ctx := newHandCtx()
			read := make(chan error, 1)
			go func() {
				_, err := v.ListPodSandbox(ctx, nil)
				read <- err
			}()
			// The first select (for the first relist, long done) is
			// passed; end the context once the read waits for the
			// confirmation.
			<-ctx.waiting(2)
			ctx.end(tc.ctxErr)
			err := <-read
			if !errors.Is(err, tc.ctxErr) || status.Code(err) != tc.code {
				t.Fatalf("read: %v (code %v); want it to wrap %v with code %v", err, status.Code(err), tc.ctxErr, tc.code)
			}
		})
	}
}

// A read that ends with its context before the first relist succeeded
// says both: the context's error and the staleness.
func TestReadEndsWithContextBeforeFirstRelist(t *testing.T) {
	listErr := status.Error(codes.Unavailable, "runtime down")
	v, err := runtimeview.New(&stubSource{listErr: listErr}, runtimeview.WithClock(clocktesting.NewFakeClock(time.Now())))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = v.Close() }()
	waitFor(t, "a failed relist", func() bool { return v.Stats().RelistErrors >= 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = v.ListContainers(ctx, nil)
	var se *runtimeview.StaleError
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled || !errors.As(err, &se) || !errors.Is(err, listErr) {
		t.Fatalf("read: %v (code %v); want Canceled wrapping a *StaleError", err, status.Code(err))
	}
}

// Subscribe waiting for a stream that does not open ends with its context,
// not with ErrUpstreamLost: nothing was lost, the caller gave up.
func TestSubscribeEndsWithContext(t *testing.T) {
	v := newStubView(t, &stubSource{})
	for _, tc := range []struct {
		ctxErr error
		code   codes.Code
	}{
		{context.Canceled, codes.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
	} {
		ctx := newHandCtx()
		ctx.end(tc.ctxErr)
		sub, err := v.Subscribe(ctx, 1)
		if sub != nil {
			sub.Close()
		}
		if !errors.Is(err, tc.ctxErr) || errors.Is(err, runtimeview.ErrUpstreamLost) || status.Code(err) != tc.code {
			t.Errorf("Subscribe with %v: %v (code %v)", tc.ctxErr, err, status.Code(err))
		}
	}
}

func isNilCtx(err error) bool {
	var ae *runtimeview.ArgError
	return errors.As(err, &ae) && ae.Arg == "ctx"
}
