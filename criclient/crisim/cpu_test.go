package crisim_test

import (
	"errors"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/crisim"
)

// Four starts at once on two cores each take twice their work: the CPU is
// shared, none finishes early, and all finish together.
func TestCPUSharesCores(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	n := startNode(t, crisim.WithClock(clk), crisim.WithImage("app:1", 1<<20),
		crisim.WithCPU(2, map[string]time.Duration{"StartContainer": 100 * time.Millisecond}))
	sb := n.runSandbox(t, "p")
	var ids []string
	for _, name := range []string{"a", "b", "c", "d"} {
		ids = append(ids, n.createContainer(t, sb, name, "app:1", nil))
	}
	done := make(chan error, len(ids))
	for _, id := range ids {
		go func() {
			_, err := n.rs.StartContainer(ctxT(t), &runtimeapi.StartContainerRequest{ContainerId: id})
			done <- err
		}()
	}
	waitFor(t, "four starts working", func() bool { return n.rt.CPUBusy() == 4 && clk.HasWaiters() })
	clk.Step(150 * time.Millisecond) // past one start's work, short of its shared time
	select {
	case err := <-done:
		t.Fatalf("a start ended after 150 ms of a 200 ms shared run: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if got := n.rt.CPUTime(); got != 300*time.Millisecond {
		t.Fatalf("CPUTime = %v after 150 ms of four starts on two cores, want 300ms", got)
	}
	clk.Step(50 * time.Millisecond)
	for range ids {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n.rt.CPUBusy() != 0 {
		t.Fatalf("CPUBusy = %d after every start", n.rt.CPUBusy())
	}
	clk.Step(time.Second) // idle cores spend nothing
	if got := n.rt.CPUTime(); got != 400*time.Millisecond {
		t.Fatalf("CPUTime = %v after four starts of 100 ms work, want 400ms", got)
	}
}

// A call whose work is done leaves the share then, not when its goroutine
// next runs: on one core, A (100 ms of work) runs alone for 50 ms, then
// shares the core with B until its work is done at 150 ms, and B has the
// core alone from then on. The clock is stepped past 150 ms in one go, as a
// late timer would see it, and B still finishes at 200 ms.
func TestCPUCallLeavesTheShareWhenItsWorkIsDone(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	n := startNode(t, crisim.WithClock(clk), crisim.WithImage("app:1", 1<<20),
		crisim.WithCPU(1, map[string]time.Duration{"StartContainer": 100 * time.Millisecond}))
	sb := n.runSandbox(t, "p")
	a, b := n.createContainer(t, sb, "a", "app:1", nil), n.createContainer(t, sb, "b", "app:1", nil)
	start := func(id string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := n.rs.StartContainer(ctxT(t), &runtimeapi.StartContainerRequest{ContainerId: id})
			done <- err
		}()
		return done
	}
	doneA := start(a)
	waitFor(t, "A working", func() bool { return n.rt.CPUBusy() == 1 && clk.Waiters() == 1 })
	clk.Step(50 * time.Millisecond)
	doneB := start(b)
	waitFor(t, "A and B working", func() bool { return n.rt.CPUBusy() == 2 })
	clk.Step(125 * time.Millisecond) // 175 ms: A done at 150, B 25 ms short
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-doneB:
		t.Fatalf("B ended at 175 ms with 25 ms of work left: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(25 * time.Millisecond)
	select {
	case err := <-doneB:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B still working at 200 ms: A kept its share after its work was done")
	}
	if got := n.rt.CPUTime(); got != 200*time.Millisecond {
		t.Fatalf("CPUTime = %v, want 200ms: the one core busy throughout", got)
	}
}

// With the store lock, a List waits for the metadata writes in flight, not
// for the CPU work of a start: runc's work after the write does not hold
// containerd's store. On a fake clock that is not stepped the start stays
// in its CPU work while the List returns.
func TestStoreLockNotHeldForCPUWork(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	n := startNode(t, crisim.WithClock(clk), crisim.WithImage("app:1", 1<<20), crisim.WithStoreLock(),
		crisim.WithCPU(2, map[string]time.Duration{"StartContainer": 100 * time.Millisecond}))
	sb := n.runSandbox(t, "p")
	id := n.createContainer(t, sb, "a", "app:1", nil)
	done := make(chan error, 1)
	go func() {
		_, err := n.rs.StartContainer(ctxT(t), &runtimeapi.StartContainerRequest{ContainerId: id})
		done <- err
	}()
	waitFor(t, "the start working", func() bool { return n.rt.CPUBusy() == 1 })
	if _, err := n.rs.ListContainers(ctxT(t), &runtimeapi.ListContainersRequest{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the start ended before its CPU work: %v", err)
	default:
	}
	clk.Step(100 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Without WithCPU a start costs no CPU time: on a fake clock that is never
// stepped it still returns (with a CPU model it would wait for the clock).
func TestNoCPUModelByDefault(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	n := startNode(t, crisim.WithClock(clk), crisim.WithImage("app:1", 1<<20))
	sb := n.runSandbox(t, "p")
	id := n.createContainer(t, sb, "a", "app:1", nil)
	if _, err := n.rs.StartContainer(ctxT(t), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if n.rt.CPUBusy() != 0 || n.rt.CPUTime() != 0 {
		t.Fatal("CPUBusy or CPUTime without a CPU model")
	}
}

func TestWithCPURefusesBadValues(t *testing.T) {
	for name, opt := range map[string]crisim.Option{
		"no cores":      crisim.WithCPU(0, nil),
		"negative work": crisim.WithCPU(2, map[string]time.Duration{"StartContainer": -time.Second}),
	} {
		var ce *crisim.ConfigError
		if _, err := crisim.New(opt); !errors.As(err, &ce) || ce.Option != "WithCPU" {
			t.Errorf("%s: New = %v, want a *ConfigError for WithCPU", name, err)
		}
	}
}
