package runtimeview_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/criclient/runtimeview"
)

func setup(t *testing.T, simOpts []crisim.Option, opts ...runtimeview.Option) (*crisim.Server, *criclient.Client, *runtimeview.View) {
	t.Helper()
	srv, err := crisim.Start(append([]crisim.Option{crisim.WithImage("busybox:1.36", 1<<20), crisim.WithEventBuffer(100000)}, simOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c, err := criclient.Dial(context.Background(), srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	v, err := runtimeview.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	// Act only once the view's stream is registered at the runtime and
	// the relist that follows its opening is done: the CRI gives a
	// subscriber no signal that its stream is live.
	waitFor(t, "the view's event stream", func() bool { return srv.Runtime().Subscribers() == 1 })
	waitFor(t, "the view's relists", func() bool { return v.Stats().Relists >= 2 })
	return srv, c, v
}

func sbConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: "u-" + name},
		Labels:   map[string]string{"app": name},
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With the relist clock frozen, a mutation reported to the view is seen by
// the next read (read-your-writes), and filters work as containerd's.
func TestReadYourWrites(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	srv, c, v := setup(t, nil, runtimeview.WithClock(clk), runtimeview.WithMaxStaleness(time.Hour))
	ctx := ctxT(t)
	// Stop the event stream from helping: drop every event.
	srv.Runtime().DropNextEvents(1 << 30)

	id, err := c.RunPodSandbox(ctx, sbConfig("web"), "")
	if err != nil {
		t.Fatal(err)
	}
	v.SandboxChanged(id)
	got, err := v.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "web"}})
	if err != nil || len(got) != 1 || got[0].GetId() != id {
		t.Fatalf("after SandboxChanged: %v %v", got, err)
	}
	cid, err := c.CreateContainer(ctx, id, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}, sbConfig("web"))
	if err != nil {
		t.Fatal(err)
	}
	v.ContainerChanged(cid, id)
	if err := c.StartContainer(ctx, cid); err != nil {
		t.Fatal(err)
	}
	v.ContainerChanged(cid, "")
	cs, err := v.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: id[:8],
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil || len(cs) != 1 || cs[0].GetId() != cid || cs[0].GetPodSandboxId() != id {
		t.Fatalf("ListContainers by sandbox prefix and state: %v %v", cs, err)
	}
	// A change the view was not told about waits for the next relist.
	other, err := c.RunPodSandbox(ctx, sbConfig("other"), "")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := v.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: other}); len(got) != 0 {
		t.Fatalf("unreported change visible before a relist: %v", got)
	}
	relists := v.Stats().Relists
	clk.Step(runtimeview.DefaultRelistPeriod)
	waitFor(t, "a relist", func() bool { return v.Stats().Relists > relists })
	if got, _ := v.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: other}); len(got) != 1 {
		t.Fatalf("after a relist: %v", got)
	}
	if err := c.RemovePodSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	v.SandboxRemoved(id)
	if got, _ := v.ListContainers(ctx, nil); len(got) != 0 {
		t.Errorf("containers of a removed sandbox: %v", got)
	}
}

// Events from others reach the view without a relist.
func TestEventsUpdateView(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	srv, c, v := setup(t, nil, runtimeview.WithClock(clk), runtimeview.WithMaxStaleness(time.Hour))
	ctx := ctxT(t)
	sub, err := v.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	_ = srv
	id, err := c.RunPodSandbox(ctx, sbConfig("web"), "")
	if err != nil {
		t.Fatal(err)
	}
	<-sub.Events()
	got, err := v.ListPodSandbox(ctx, nil)
	if err != nil || len(got) != 1 || got[0].GetId() != id {
		t.Fatalf("after the CREATED event: %v %v", got, err)
	}
	if err := c.StopPodSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	for ev := range sub.Events() {
		if ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
			break
		}
	}
	got, _ = v.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}})
	if len(got) != 1 {
		t.Fatalf("after the STOPPED event: %v", got)
	}
	if v.Stats().Relists > 2 {
		t.Errorf("%d relists with a frozen clock", v.Stats().Relists)
	}
}

// A runtime that stops answering Lists makes reads fail with *StaleError
// (Unavailable) once the bound passes, and Health says so; it recovers.
func TestStaleness(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	srv, _, v := setup(t, nil, runtimeview.WithClock(clk), runtimeview.WithRelistPeriod(time.Second), runtimeview.WithMaxStaleness(5*time.Second))
	ctx := ctxT(t)
	if _, err := v.ListPodSandbox(ctx, nil); err != nil {
		t.Fatal(err)
	}
	srv.Runtime().SetErrorRate("ListPodSandbox", 1, codes.Unavailable)
	for i := 0; i < 6; i++ {
		n := v.Stats().Relists
		clk.Step(time.Second)
		waitFor(t, "a relist", func() bool { return v.Stats().Relists > n })
	}
	_, err := v.ListPodSandbox(ctx, nil)
	var se *runtimeview.StaleError
	if !errors.As(err, &se) || status.Code(err) != codes.Unavailable || status.Code(se.LastErr) != codes.Unavailable {
		t.Fatalf("read of a stale view: %v", err)
	}
	if se.Age <= se.Bound {
		t.Errorf("StaleError age %v within bound %v", se.Age, se.Bound)
	}
	if v.Health() == nil {
		t.Error("Health nil on a stale view")
	}
	srv.Runtime().SetErrorRate("ListPodSandbox", 0, codes.OK)
	n := v.Stats().Relists
	clk.Step(time.Second)
	waitFor(t, "a relist", func() bool { return v.Stats().Relists > n })
	if err := v.Health(); err != nil {
		t.Errorf("Health after recovery: %v", err)
	}
}

// With WithStaleReads a view past its bound keeps answering from its last
// data, also a read that waits for a confirmation the runtime cannot make,
// while Health reports the *StaleError.
func TestStaleReads(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	srv, c, v := setup(t, nil, runtimeview.WithClock(clk), runtimeview.WithRelistPeriod(time.Second),
		runtimeview.WithMaxStaleness(5*time.Second), runtimeview.WithStaleReads(true))
	ctx := ctxT(t)
	id, err := c.RunPodSandbox(ctx, sbConfig("held"), "")
	if err != nil {
		t.Fatal(err)
	}
	v.SandboxChanged(id)
	if got, err := v.ListPodSandbox(ctx, nil); err != nil || len(got) != 1 {
		t.Fatalf("before the fault: %v %v", got, err)
	}
	srv.Runtime().SetErrorRate("ListPodSandbox", 1, codes.Unavailable)
	srv.Runtime().SetErrorRate("ListContainers", 1, codes.Unavailable)
	srv.Runtime().SetErrorRate("PodSandboxStatus", 1, codes.Unavailable)
	for i := 0; i < 6; i++ {
		n := v.Stats().Relists
		clk.Step(time.Second)
		waitFor(t, "a relist", func() bool { return v.Stats().Relists > n })
	}
	var se *runtimeview.StaleError
	if err := v.Health(); !errors.As(err, &se) || se.Age <= se.Bound {
		t.Fatalf("Health past the bound: %v", err)
	}
	got, err := v.ListPodSandbox(ctx, nil)
	if err != nil || len(got) != 1 || got[0].GetId() != id {
		t.Fatalf("stale read: %v %v, want the held sandbox", got, err)
	}
	// A mutation the runtime cannot confirm does not hold a read past the
	// bound: it returns what the view holds.
	v.SandboxChanged(id)
	if got, err := v.ListPodSandbox(ctx, nil); err != nil || len(got) != 1 {
		t.Fatalf("stale read with a confirmation pending: %v %v", got, err)
	}
	if _, err := v.ListContainers(ctx, nil); err != nil {
		t.Fatalf("stale ListContainers: %v", err)
	}
}

// A subscriber that stops reading is ended with ErrOverflow; the others
// get every event, and the runtime dropped none.
func TestSlowSubscriberOverflows(t *testing.T) {
	srv, c, v := setup(t, nil)
	ctx := ctxT(t)
	slow, err := v.Subscribe(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := v.Subscribe(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	const pods = 20
	for i := range pods {
		if _, err := c.RunPodSandbox(ctx, sbConfig(fmt.Sprint("p", i)), ""); err != nil {
			t.Fatal(err)
		}
	}
	// Each sandbox makes a CREATED and a STARTED event.
	for i := range 2 * pods {
		if ev, ok := <-fast.Events(); !ok {
			t.Fatalf("fast subscriber event %d: %v %v (%v)", i, ev, ok, fast.Err())
		}
	}
	n := 0
	for range slow.Events() {
		n++
	}
	if !errors.Is(slow.Err(), runtimeview.ErrOverflow) || n != 2 {
		t.Errorf("slow subscriber got %d events and %v, want 2 and ErrOverflow", n, slow.Err())
	}
	if full, dropped := srv.Runtime().EventsLost(); full+dropped != 0 {
		t.Errorf("runtime lost %d events", full+dropped)
	}
	if v.Stats().Overflows != 1 {
		t.Errorf("Overflows = %d", v.Stats().Overflows)
	}
}

// When the runtime's stream breaks, every subscription ends with
// ErrUpstreamLost and a new one can be made once the stream is back.
func TestUpstreamLost(t *testing.T) {
	srv, c, v := setup(t, nil)
	ctx := ctxT(t)
	sub, err := v.Subscribe(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	srv.Runtime().CutEventStreamsAfter(0)
	if _, err := c.RunPodSandbox(ctx, sbConfig("a"), ""); err != nil {
		t.Fatal(err)
	}
	for range sub.Events() {
	}
	if !errors.Is(sub.Err(), runtimeview.ErrUpstreamLost) {
		t.Fatalf("subscription ended with %v, want ErrUpstreamLost", sub.Err())
	}
	srv.Runtime().CutEventStreamsAfter(-1)
	waitFor(t, "the view's stream to reopen", func() bool { return srv.Runtime().Subscribers() == 1 })
	again, err := v.Subscribe(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := c.RunPodSandbox(ctx, sbConfig("b"), ""); err != nil {
		t.Fatal(err)
	}
	if ev, ok := <-again.Events(); !ok || ev.GetPodSandboxStatus().GetMetadata().GetName() != "b" {
		t.Errorf("after reconnect: %v %v (%v)", ev, ok, again.Err())
	}
}

func TestCloseEndsEverything(t *testing.T) {
	_, _, v := setup(t, nil)
	ctx := ctxT(t)
	sub, err := v.Subscribe(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	v.Close()
	if _, ok := <-sub.Events(); ok || !errors.Is(sub.Err(), runtimeview.ErrClosed) {
		t.Errorf("subscription after Close: %v", sub.Err())
	}
	if _, err := v.ListPodSandbox(ctx, nil); !errors.Is(err, runtimeview.ErrClosed) {
		t.Errorf("read after Close: %v", err)
	}
	if _, err := v.Subscribe(ctx, 1); !errors.Is(err, runtimeview.ErrClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
}
