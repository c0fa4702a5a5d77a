package criclient_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"
)

// maxObserver records the highest in-flight count and queue wait seen.
type maxObserver struct {
	mu        sync.Mutex
	maxIn     map[string]int
	queued    map[string]int
	finished  map[string]int
	errs      map[string]int
	lastError error
}

func newMaxObserver() *maxObserver {
	return &maxObserver{maxIn: map[string]int{}, queued: map[string]int{}, finished: map[string]int{}, errs: map[string]int{}}
}

func (o *maxObserver) observe(i criclient.Event) {
	switch i.Kind {
	case criclient.CallAdmitted:
		o.callAdmitted(i)
	case criclient.CallFinished:
		o.callFinished(i)
	}
}

func (o *maxObserver) callAdmitted(i criclient.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.maxIn[i.Method] = max(o.maxIn[i.Method], i.InFlight)
	if i.QueueWait > 0 {
		o.queued[i.Method]++
	}
}

func (o *maxObserver) callFinished(i criclient.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished[i.Method]++
	if i.Err != nil {
		o.errs[i.Method]++
		o.lastError = i.Err
	}
}

func (o *maxObserver) get(m map[string]int, method string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return m[method]
}

func TestInFlightBoundHoldsUnder200Callers(t *testing.T) {
	const bound, callers = 4, 200
	simClock := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	srv := startSim(t, crisim.WithClock(simClock), crisim.WithLatency("ListContainers", crisim.Fixed(time.Second)))
	obs := newMaxObserver()
	c := dial(t, srv, criclient.WithObserver(obs.observe),
		criclient.WithAdmission(criclient.ClassRead, criclient.Limits{MaxInFlight: bound}))
	rt := srv.Runtime()

	var wg sync.WaitGroup
	var failed atomic.Int64
	for range callers {
		wg.Go(func() {
			if _, err := c.ListContainers(context.Background(), nil); err != nil {
				failed.Add(1)
			}
		})
	}
	// The runtime holds each call until its clock moves: the first `bound`
	// calls sit in the runtime and the other 196 must wait in the client.
	eventually(t, "the bound to fill", func() bool { return rt.InFlight("ListContainers") == bound })
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
			if simClock.HasWaiters() {
				simClock.Step(time.Second)
			}
			time.Sleep(time.Millisecond) // let admitted calls reach the runtime
		}
	}
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d calls failed", n)
	}
	if got := rt.MaxInFlight("ListContainers"); got != bound {
		t.Fatalf("runtime saw %d concurrent ListContainers, want exactly the bound %d", got, bound)
	}
	if got := obs.get(obs.maxIn, "ListContainers"); got != bound {
		t.Fatalf("observer saw %d in flight, want %d", got, bound)
	}
	if got := rt.Calls("ListContainers"); got != callers {
		t.Fatalf("runtime got %d calls, want %d", got, callers)
	}
	if obs.get(obs.queued, "ListContainers") == 0 {
		t.Fatal("no call reported a queue wait")
	}
}

func TestMutationBurstDoesNotStarveLists(t *testing.T) {
	srv := startSim(t, crisim.WithStoreLock())
	rt := srv.Runtime()
	c := dial(t, srv, criclient.WithAdmission(criclient.ClassMutating, criclient.Limits{MaxInFlight: 2}))

	// 50 RunPodSandbox calls hang in the runtime until the burst is
	// cancelled; only 2 may be sent, 48 queue in the client.
	rt.HangNext("RunPodSandbox", 50)
	burst, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { _, _ = c.RunPodSandbox(burst, sandboxConfig(fmt.Sprintf("burst-%d", i)), "") })
	}
	eventually(t, "two RunPodSandbox in the runtime", func() bool { return rt.InFlight("RunPodSandbox") == 2 })

	// Reads have their own class: they are not queued behind the burst.
	for range 10 {
		if _, err := c.ListContainers(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ListPodSandbox(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := rt.Calls("RunPodSandbox"); got != 2 {
		t.Fatalf("runtime got %d RunPodSandbox calls, want the bound 2", got)
	}
	cancel()
	wg.Wait()
}

func TestCancelWhileQueuedForSlot(t *testing.T) {
	srv := startSim(t)
	rt := srv.Runtime()
	obs := newMaxObserver()
	c := dial(t, srv, criclient.WithObserver(obs.observe),
		criclient.WithAdmission(criclient.ClassMutating, criclient.Limits{MaxInFlight: 1}))

	rt.HangNext("RunPodSandbox", 1)
	holder, releaseHolder := context.WithCancel(context.Background())
	defer releaseHolder()
	held := make(chan error, 1)
	go func() { _, err := c.RunPodSandbox(holder, sandboxConfig("holder"), ""); held <- err }()
	eventually(t, "the slot to be taken", func() bool { return rt.InFlight("RunPodSandbox") == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() { _, err := c.RunPodSandbox(ctx, sandboxConfig("queued"), ""); queued <- err }()
	cancel()
	err := <-queued
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Fatalf("queued call = %v (code %v), want context.Canceled", err, status.Code(err))
	}
	var ce *criclient.CallError
	if !errors.As(err, &ce) || ce.Method != "RunPodSandbox" {
		t.Fatalf("error %v does not name the method", err)
	}
	if got := rt.Calls("RunPodSandbox"); got != 1 {
		t.Fatalf("the cancelled call reached the runtime (%d calls)", got)
	}
	releaseHolder()
	<-held
	// The slot is free again.
	if _, err := c.RunPodSandbox(context.Background(), sandboxConfig("after"), ""); err != nil {
		t.Fatal(err)
	}
}

func TestDeadlineWhileQueuedForToken(t *testing.T) {
	srv := startSim(t)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	c := dial(t, srv, criclient.WithClock(clk), criclient.WithoutVersionCheck(),
		criclient.WithAdmission(criclient.ClassRead, criclient.Limits{QPS: 1, Burst: 1}))
	if _, err := c.Status(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	// The bucket is empty and the fake clock never moves: the next call
	// waits until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := c.Status(ctx, false)
	if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("queued call = %v, want context.DeadlineExceeded", err)
	}
	if errors.Is(err, criclient.ErrTimeout) {
		t.Fatal("the caller's deadline was reported as the client's timeout")
	}
	if got := srv.Runtime().Calls("Status"); got != 1 {
		t.Fatalf("runtime got %d Status calls, want 1", got)
	}
	// A second later the token is back.
	clk.Step(time.Second)
	if _, err := c.Status(context.Background(), false); err != nil {
		t.Fatal(err)
	}
}

func TestClassesHaveSeparateBuckets(t *testing.T) {
	srv := startSim(t)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	c := dial(t, srv, criclient.WithClock(clk), criclient.WithoutVersionCheck(),
		criclient.WithAdmission(criclient.ClassMutating, criclient.Limits{QPS: 1, Burst: 1}))
	if _, err := c.RunPodSandbox(context.Background(), sandboxConfig("a"), ""); err != nil {
		t.Fatal(err)
	}
	// Mutations are out of tokens; reads are not limited at all.
	for range 20 {
		if _, err := c.ListPodSandbox(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := c.RunPodSandbox(ctx, sandboxConfig("b"), ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("mutation with an empty bucket = %v", err)
	}
}
