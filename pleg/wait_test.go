package pleg

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
)

// eventedSim is an evented PLEG over a crisim runtime. Its fake clock never
// moves, so the cache's global time stays where the reconcile relist left
// it: only runtime events tell the PLEG anything afterwards.
func eventedSim(t *testing.T, opts ...Option) (*simEnv, func()) {
	t.Helper()
	rt, c := startSim(t)
	env := &simEnv{rt: rt, c: c, cache: newFakeCache(), clock: testclock.NewFakeClock(time.Now())}
	p, err := New(c, env.cache, append([]Option{WithClock(env.clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	env.p = p
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "evented mode", func() bool { return p.Mode() == ModeEvented })
	// The CRI does not say when the runtime starts sending on a stream it
	// opened; until it does, an event reaches the PLEG only through the
	// safety-net relist, which the fake clock never fires.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rt.WaitSubscribers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return env, func() { _ = p.Close() }
}

type simEnv struct {
	rt    *crisim.Runtime
	c     *criclient.Client
	cache *fakeCache
	clock *testclock.FakeClock
	p     *PLEG
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // bounds a hang only
	t.Cleanup(cancel)
	return ctx
}

// In evented mode a wait for an exit ends on the runtime's STOPPED event,
// with the exit code, the cache written and the event delivered, while the
// cache's global time does not move.
func TestWaitContainerStateEvented(t *testing.T) {
	env, stop := eventedSim(t)
	defer stop()
	sub, err := env.p.Subscribe(100)
	if err != nil {
		t.Fatal(err)
	}
	globalBefore := env.cache.globalTimes()
	sp := makePods(t, env.c, 1, 1)[0]
	id := sp.containers[0]
	ctx := waitCtx(t)

	st, err := env.p.WaitContainerState(ctx, sp.uid, id, running)
	if err != nil || st.GetState() != running || st.GetId() != id {
		t.Fatalf("WaitContainerState(RUNNING) = %v, %v", st, err)
	}

	type result struct {
		st  *runtimeapi.ContainerStatus
		err error
	}
	got := make(chan result, 1)
	go func() {
		st, err := env.p.WaitContainerState(ctx, sp.uid, id, exited)
		got <- result{st, err}
	}()
	waitFor(t, "the wait to block", func() bool {
		env.p.mu.Lock()
		defer env.p.mu.Unlock()
		return len(env.p.waiters) == 1
	})
	if err := env.rt.ExitContainer(id, 3); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || r.st.GetState() != exited || r.st.GetExitCode() != 3 {
		t.Fatalf("WaitContainerState(EXITED) = %v, %v; want exited with code 3", r.st, r.err)
	}
	// Before it returned: the cache holds the exit and the event is delivered.
	if env.cache.containerStates(sp.uid)[id] != exited {
		t.Errorf("cache: %v, want %s exited", env.cache.containerStates(sp.uid), id)
	}
	if !hasEvent(sub, ev(sp.uid, ContainerDied, id)) {
		t.Error("ContainerDied not delivered when the wait returned")
	}
	if after := env.cache.globalTimes(); len(after) != len(globalBefore) {
		t.Errorf("global time moved (%v → %v): the wait must not need it", globalBefore, after)
	}

	// Reached before the call: answered at once, again and again.
	for _, want := range []runtimeapi.ContainerState{created, running, exited} {
		if st, err := env.p.WaitContainerState(ctx, sp.uid, id, want); err != nil || st.GetExitCode() != 3 {
			t.Errorf("WaitContainerState(%s) after the exit = %v, %v", want, st, err)
		}
	}

	// Removed: the removal wait ends with the last status, and a wait for
	// the exit still answers with it.
	if err := env.c.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, err := env.p.WaitContainerRemoved(ctx, sp.uid, id); err != nil || st.GetExitCode() != 3 {
		t.Fatalf("WaitContainerRemoved = %v, %v; want the last status (exit 3)", st, err)
	}
	if !hasEvent(sub, ev(sp.uid, ContainerRemoved, id)) {
		t.Error("ContainerRemoved not delivered when the wait returned")
	}
	if st, err := env.p.WaitContainerState(ctx, sp.uid, id, exited); err != nil || st.GetExitCode() != 3 {
		t.Errorf("WaitContainerState(EXITED) after removal = %v, %v", st, err)
	}
}

// hasEvent reports whether want is among the events buffered in sub,
// without waiting.
func hasEvent(sub *Subscription, want Event) bool {
	for {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				return false
			}
			if e == want {
				return true
			}
		default:
			return false
		}
	}
}

// A container removed before it ran can never be running: the wait says
// so with ErrRemoved, whether it was waiting already or called after.
func TestWaitContainerStateRemovedFirst(t *testing.T) {
	env, stop := eventedSim(t)
	defer stop()
	ctx := waitCtx(t)
	sp := makePods(t, env.c, 1, 0)[0]
	id, err := env.c.CreateContainer(ctx, sp.sandbox, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "never-started"},
		Image:    &runtimeapi.ImageSpec{Image: simImage},
	}, sp.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := env.p.WaitContainerState(ctx, sp.uid, id, created); err != nil || st.GetState() != created {
		t.Fatalf("WaitContainerState(CREATED) = %v, %v", st, err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := env.p.WaitContainerState(ctx, sp.uid, id, running)
		got <- err
	}()
	waitFor(t, "the wait to block", func() bool {
		env.p.mu.Lock()
		defer env.p.mu.Unlock()
		return len(env.p.waiters) == 1
	})
	if err := env.c.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrRemoved) {
		t.Errorf("blocked WaitContainerState(RUNNING) of a removed container: %v; want ErrRemoved", err)
	}
	_, err = env.p.WaitContainerState(ctx, sp.uid, id, running)
	if want := "was removed before the PLEG saw it running"; !errors.Is(err, ErrRemoved) || !strings.Contains(err.Error(), want) {
		t.Errorf("WaitContainerState(RUNNING) after the removal: %v; want ErrRemoved saying %q", err, want)
	}
	if st, err := env.p.WaitContainerRemoved(ctx, sp.uid, id); err != nil || st.GetState() != created {
		t.Errorf("WaitContainerRemoved = %v, %v; want the last status (created)", st, err)
	}
}

// A wait on a container the PLEG does not see ends with ctx's error when
// ctx is done, and with ErrClosed when the PLEG closes.
func TestWaitContainerStateCancelAndClose(t *testing.T) {
	f := newFixture(t)
	if err := f.p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 2)
	go func() {
		_, err := f.p.WaitContainerState(ctx, "a", "c1", exited)
		got <- err
	}()
	go func() {
		_, err := f.p.WaitContainerRemoved(context.Background(), "a", "c1")
		got <- err
	}()
	waitFor(t, "both waits to block", func() bool {
		f.p.mu.Lock()
		defer f.p.mu.Unlock()
		return len(f.p.waiters) == 2
	})
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v; want context.Canceled", err)
	}
	if err := f.p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Errorf("wait blocked at Close: %v; want ErrClosed", err)
	}
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	if len(f.p.waiters) != 0 {
		t.Errorf("%d waiters left after Close", len(f.p.waiters))
	}
}

// In relisting mode the wait ends at the relist that shows the state.
func TestWaitContainerStateRelisting(t *testing.T) {
	f := newFixture(t)
	f.setContainers(fc{"a", "c1", running})
	f.relist()
	ctx := waitCtx(t)
	got := make(chan error, 1)
	go func() {
		st, err := f.p.WaitContainerState(ctx, "a", "c1", exited)
		if err == nil && st.GetState() != exited {
			err = errors.New("status not exited: " + st.String())
		}
		got <- err
	}()
	waitFor(t, "the wait to block", func() bool {
		f.p.mu.Lock()
		defer f.p.mu.Unlock()
		return len(f.p.waiters) == 1
	})
	f.setContainers(fc{"a", "c1", exited})
	f.relist()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	assertEvents(t, drain(f.p), ev("a", ContainerStarted, "c1"), ev("a", ContainerDied, "c1"))
}
