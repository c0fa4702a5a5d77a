package crisim_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/crisim"
)

func version(ctx context.Context, n *node) error {
	_, err := n.rs.Version(ctx, &runtimeapi.VersionRequest{})
	return err
}

func TestFailNext(t *testing.T) {
	n := startNode(t)
	ctx := ctxT(t)
	n.rt.FailNext("Version", 2, status.Error(codes.ResourceExhausted, "scripted"))
	for i := range 2 {
		err := version(ctx, n)
		wantCode(t, err, codes.ResourceExhausted)
		if status.Convert(err).Message() != "scripted" {
			t.Fatalf("call %d: message %q", i, status.Convert(err).Message())
		}
	}
	if err := version(ctx, n); err != nil {
		t.Fatalf("third call: %v, want success", err)
	}
	// A nil error means Unavailable; other methods are unaffected.
	n.rt.FailNext("Version", 1, nil)
	if _, err := n.rs.Status(ctx, &runtimeapi.StatusRequest{}); err != nil {
		t.Fatalf("Status: %v", err)
	}
	wantCode(t, version(ctx, n), codes.Unavailable)
	// n <= 0 clears the queue.
	n.rt.FailNext("Version", 5, nil)
	n.rt.FailNext("Version", 0, nil)
	if err := version(ctx, n); err != nil {
		t.Fatalf("after clearing: %v", err)
	}
	if got := n.rt.Calls("Version"); got != 5 {
		t.Fatalf("Calls(Version) = %d, want 5 (failed calls count)", got)
	}
}

func TestSetErrorRate(t *testing.T) {
	failures := func(seed int64) []bool {
		rt := newRuntime(t, crisim.WithSeed(seed))
		defer rt.Close()
		rt.SetErrorRate("Version", 0.3, codes.Internal)
		var out []bool
		for range 1000 {
			_, err := rt.Version(context.Background(), &runtimeapi.VersionRequest{})
			if err != nil && status.Code(err) != codes.Internal {
				t.Fatalf("code %v, want Internal", status.Code(err))
			}
			if err != nil && !errors.Is(err, crisim.ErrInjected) {
				t.Fatalf("%v is not ErrInjected", err)
			}
			out = append(out, err != nil)
		}
		return out
	}
	a, b := failures(7), failures(7)
	fails := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("call %d differs between runs with the same seed", i)
		}
		if a[i] {
			fails++
		}
	}
	if fails < 220 || fails > 380 {
		t.Fatalf("%d of 1000 calls failed at rate 0.3", fails)
	}

	n := startNode(t)
	ctx := ctxT(t)
	n.rt.SetErrorRate("Version", 1, codes.Unavailable)
	wantCode(t, version(ctx, n), codes.Unavailable)
	n.rt.SetErrorRate("Version", 0, codes.OK)
	if err := version(ctx, n); err != nil {
		t.Fatalf("after rate 0: %v", err)
	}
}

func TestHangNext(t *testing.T) {
	n := startNode(t)
	if err := version(ctxT(t), n); err != nil { // connect first
		t.Fatal(err)
	}
	n.rt.HangNext("Version", 2)

	ctx, cancel := context.WithTimeout(ctxT(t), 500*time.Millisecond)
	defer cancel()
	wantCode(t, version(ctx, n), codes.DeadlineExceeded)
	// The server sees the deadline a moment after the client does.
	waitFor(t, "first hung call gone", func() bool { return n.rt.InFlight("Version") == 0 })

	ctx2, cancel2 := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() { done <- version(ctx2, n) }()
	waitFor(t, "hung call in flight", func() bool { return n.rt.InFlight("Version") == 1 })
	select {
	case err := <-done:
		t.Fatalf("hung call returned %v before its context ended", err)
	default:
	}
	cancel2()
	wantCode(t, <-done, codes.Canceled)
	waitFor(t, "second hung call gone", func() bool { return n.rt.InFlight("Version") == 0 })

	if err := version(ctxT(t), n); err != nil {
		t.Fatalf("third call: %v, want success", err)
	}
}

func TestHangEndsOnClose(t *testing.T) {
	n := startNode(t)
	n.rt.HangNext("ListContainers", 1)
	done := make(chan error, 1)
	go func() {
		_, err := n.rs.ListContainers(ctxT(t), &runtimeapi.ListContainersRequest{})
		done <- err
	}()
	waitFor(t, "hung call in flight", func() bool { return n.rt.InFlight("ListContainers") == 1 })
	if err := n.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("hung call succeeded after Close")
	}
	if err := n.srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	wantCode(t, version(ctxT(t), n), codes.Unavailable)
}

func TestStall(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	n := startNode(t, crisim.WithClock(clk))
	n.rt.Stall(10 * time.Second)

	const callers = 3
	done := make(chan error, callers)
	for range callers {
		go func() { done <- version(ctxT(t), n) }()
	}
	waitFor(t, "stalled calls waiting", func() bool { return n.rt.InFlight("Version") == callers && clk.Waiters() == callers })
	clk.Step(9 * time.Second)
	waitFor(t, "stalled calls waiting again", func() bool { return clk.Waiters() == callers })
	select {
	case err := <-done:
		t.Fatalf("call returned (%v) inside the stall window", err)
	default:
	}
	// A call whose context ends inside the window fails with it.
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	wantCode(t, version(ctx, n), codes.Canceled)

	clk.Step(time.Second)
	for range callers {
		if err := <-done; err != nil {
			t.Fatalf("after the window: %v", err)
		}
	}
	if err := version(ctxT(t), n); err != nil {
		t.Fatalf("after the window: %v", err)
	}

	// Stall(0) ends a window at once.
	n.rt.Stall(time.Hour)
	go func() { done <- version(ctxT(t), n) }()
	waitFor(t, "stalled call", func() bool { return n.rt.InFlight("Version") == 1 })
	n.rt.Stall(0)
	if err := <-done; err != nil {
		t.Fatalf("after Stall(0): %v", err)
	}
}

func TestCutEventStreamsAfter(t *testing.T) {
	n := startNode(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	open := n.events(t, ctx)
	n.rt.CutEventStreamsAfter(3)
	later := n.events(t, ctx)

	n.runSandbox(t, "a") // 2 events
	n.runSandbox(t, "b") // 2 events
	for name, s := range map[string]runtimeapi.RuntimeService_GetContainerEventsClient{"open": open, "later": later} {
		for i := range 3 {
			if _, err := s.Recv(); err != nil {
				t.Fatalf("%s stream event %d: %v", name, i, err)
			}
		}
		_, err := s.Recv()
		wantCode(t, err, codes.Unavailable)
	}
	waitFor(t, "cut streams unsubscribed", func() bool { return n.rt.Subscribers() == 0 })

	// Off again: a new stream gets everything.
	n.rt.CutEventStreamsAfter(-1)
	s := n.events(t, ctx)
	for _, name := range []string{"c", "d", "e"} {
		n.runSandbox(t, name)
	}
	for i := range 6 {
		recvEvent(t, s)
		_ = i
	}

	// 0 ends open streams now.
	n.rt.CutEventStreamsAfter(0)
	_, err := s.Recv()
	wantCode(t, err, codes.Unavailable)
}

func TestDropNextEvents(t *testing.T) {
	n := startNode(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	s1 := n.events(t, ctx)
	s2 := n.events(t, ctx)
	n.rt.DropNextEvents(2)
	n.runSandbox(t, "lost") // CREATED + STARTED dropped
	kept := n.runSandbox(t, "kept")
	for _, s := range []runtimeapi.RuntimeService_GetContainerEventsClient{s1, s2} {
		for _, want := range []runtimeapi.ContainerEventType{
			runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
			runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
		} {
			ev := recvEvent(t, s)
			if ev.ContainerId != kept || ev.ContainerEventType != want {
				t.Fatalf("got %s %v, want %s %v", ev.ContainerId, ev.ContainerEventType, kept, want)
			}
		}
	}
	if _, dropped := n.rt.EventsLost(); dropped != 2 {
		t.Fatalf("EventsLost dropped = %d, want 2", dropped)
	}
}

func TestEventStreamFaultsApply(t *testing.T) {
	n := startNode(t)
	n.rt.FailNext("GetContainerEvents", 1, status.Error(codes.Unavailable, "no"))
	s, err := n.rs.GetContainerEvents(ctxT(t), &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	wantCode(t, err, codes.Unavailable)
	if n.rt.Calls("GetContainerEvents") != 1 {
		t.Fatalf("Calls(GetContainerEvents) = %d", n.rt.Calls("GetContainerEvents"))
	}
}

func TestEventStreamEndsOnClose(t *testing.T) {
	n := startNode(t)
	s := n.events(t, ctxT(t))
	if err := n.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err == nil || err == io.EOF {
		t.Fatalf("Recv after Close = %v, want an error", err)
	}
}

func TestMaxInFlightAndResetCalls(t *testing.T) {
	n := startNode(t)
	const callers = 5
	n.rt.HangNext("ContainerStatus", callers)
	ctx, cancel := context.WithCancel(ctxT(t))
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			n.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "x"})
		})
	}
	waitFor(t, "all callers in flight", func() bool { return n.rt.InFlight("ContainerStatus") == callers })
	cancel()
	wg.Wait()
	waitFor(t, "callers gone", func() bool { return n.rt.InFlight("ContainerStatus") == 0 })
	if got := n.rt.MaxInFlight("ContainerStatus"); got != callers {
		t.Fatalf("MaxInFlight = %d, want %d", got, callers)
	}
	if got := n.rt.CallCounts()["ContainerStatus"]; got != callers {
		t.Fatalf("CallCounts = %v", n.rt.CallCounts())
	}
	n.rt.ResetCalls()
	if n.rt.Calls("ContainerStatus") != 0 || n.rt.MaxInFlight("ContainerStatus") != 0 || len(n.rt.CallCounts()) != 0 {
		t.Fatalf("after ResetCalls: %v, max %d", n.rt.CallCounts(), n.rt.MaxInFlight("ContainerStatus"))
	}
}
