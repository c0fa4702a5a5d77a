package runtimeview_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/runtimeview"
)

// panicSource fails every call the way a zero-value fake does: by writing
// to a nil map.
type panicSource struct{ seen map[string]int }

func (s *panicSource) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	s.seen["ListPodSandbox"]++
	return nil, nil
}

func (s *panicSource) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	s.seen["ListContainers"]++
	return nil, nil
}

func (s *panicSource) PodSandboxStatus(context.Context, string, bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	panic("PodSandboxStatus not implemented")
}

func (s *panicSource) ContainerStatus(context.Context, string, bool) (*runtimeapi.ContainerStatusResponse, error) {
	panic("ContainerStatus not implemented")
}

func (s *panicSource) GetContainerEvents(context.Context, chan *runtimeapi.ContainerEventResponse, func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	panic("GetContainerEvents not implemented")
}

// closingSource sends one event per stream, then closes the events channel
// and waits for the end of the call, as the CRI contract allows.
type closingSource struct{ stubSource }

func (s *closingSource) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	opened(nil)
	select {
	case ch <- &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT}:
	case <-ctx.Done():
		return ctx.Err()
	}
	close(ch)
	<-ctx.Done()
	return ctx.Err()
}

func TestMisuseNew(t *testing.T) {
	src := &stubSource{}
	var typedNil *stubSource
	for _, tc := range []struct {
		name   string
		src    runtimeview.Source
		opts   []runtimeview.Option
		option string
	}{
		{"nil source", nil, nil, "src"},
		{"typed-nil source", typedNil, nil, "src"},
		{"negative relist period", src, []runtimeview.Option{runtimeview.WithRelistPeriod(-1)}, "WithRelistPeriod"},
		{"negative staleness", src, []runtimeview.Option{runtimeview.WithMaxStaleness(-time.Second)}, "WithMaxStaleness"},
		{"zero status timeout", src, []runtimeview.Option{runtimeview.WithStatusTimeout(0)}, "WithStatusTimeout"},
		{"typed-nil clock", src, []runtimeview.Option{runtimeview.WithClock((*clocktesting.FakeClock)(nil))}, "WithClock"},
		{"nil logger", src, []runtimeview.Option{runtimeview.WithLogger(nil)}, "WithLogger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := runtimeview.New(tc.src, tc.opts...)
			var ce *runtimeview.ConfigError
			if v != nil || !errors.As(err, &ce) || ce.Option != tc.option {
				if v != nil {
					_ = v.Close()
				}
				t.Fatalf("New: %v; want a *ConfigError for %s", err, tc.option)
			}
			if want := "runtimeview: " + tc.option + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("message %q, want prefix %q", err, want)
			}
		})
	}
}

func TestMisuseNilOptionIgnored(t *testing.T) {
	v, err := runtimeview.New(&stubSource{}, nil, runtimeview.WithClock(clocktesting.NewFakeClock(time.Now())))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMisuseNilContext(t *testing.T) {
	v := newStubView(t, &stubSource{openStream: true})
	var nilCtx context.Context
	_, err := v.ListPodSandbox(nilCtx, nil)
	var ae *runtimeview.ArgError
	if !errors.As(err, &ae) || ae.Method != "ListPodSandbox" || ae.Arg != "ctx" || err.Error() != "runtimeview: ListPodSandbox: ctx must not be nil" {
		t.Errorf("ListPodSandbox(nil): %v", err)
	}
}

func TestMisuseCloseTwiceAndUseAfterClose(t *testing.T) {
	v := newStubView(t, &stubSource{openStream: true})
	sub, err := v.Subscribe(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := context.Background()
	if _, err := v.ListPodSandbox(ctx, nil); !errors.Is(err, runtimeview.ErrClosed) {
		t.Errorf("ListPodSandbox after Close: %v", err)
	}
	if _, err := v.ListContainers(ctx, nil); !errors.Is(err, runtimeview.ErrClosed) {
		t.Errorf("ListContainers after Close: %v", err)
	}
	if _, err := v.Subscribe(ctx, 1); !errors.Is(err, runtimeview.ErrClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
	if err := v.Health(); !errors.Is(err, runtimeview.ErrClosed) {
		t.Errorf("Health after Close: %v", err)
	}
	if !errors.Is(sub.Err(), runtimeview.ErrClosed) {
		t.Errorf("subscription after Close: %v", sub.Err())
	}
	if err := sub.Close(); err != nil {
		t.Errorf("Subscription.Close after the view's Close: %v", err)
	}
}

func TestMisusePanickingSource(t *testing.T) {
	v, err := runtimeview.New(&panicSource{}, runtimeview.WithClock(clocktesting.NewFakeClock(time.Now())))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = v.Close() }()
	waitFor(t, "a failed relist", func() bool { return v.Stats().RelistErrors >= 1 })
	waitFor(t, "a failed event stream", func() bool { return v.Stats().StreamBreaks >= 1 })
	var se *runtimeview.StaleError
	if err := v.Health(); !errors.As(err, &se) || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("Health: %v; want a *StaleError saying the source panicked", err)
	}
}

// A source that closes the events channel ends that stream; the view
// reconnects and never closes the channel a second time.
func TestMisuseSourceClosesEventsChannel(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	v, err := runtimeview.New(&closingSource{}, runtimeview.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = v.Close() }()
	waitFor(t, "the end of the first stream", func() bool { return v.Stats().StreamBreaks >= 1 })
	waitFor(t, "the second stream's event", func() bool {
		clk.Step(time.Minute) // past the reconnect back-off, once the view waits on it
		return v.Stats().Events >= 2
	})
}
