package criclient_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestSnapshotNeverOlderThanBound checks the guarantee as a property: at any
// moment, a List answer holds every sandbox created more than the bound
// before it was asked for. Sandboxes are created by another client, so no
// invalidation helps; refreshes (including background ones) race with the
// test stepping the clock.
func TestSnapshotNeverOlderThanBound(t *testing.T) {
	const bound = time.Second
	srv := startSim(t)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	snap := dial(t, srv, criclient.WithClock(clk), criclient.WithListSnapshots(bound))
	other := dial(t, srv)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))

	created := map[string]time.Time{}
	for i := range 300 {
		clk.Step(time.Duration(rng.Int64N(int64(bound * 7 / 10))))
		if rng.IntN(2) == 0 {
			at := clk.Now()
			id, err := other.RunPodSandbox(ctx, sandboxConfig(fmt.Sprint("p", i)), "")
			if err != nil {
				t.Fatal(err)
			}
			created[id] = at
		}
		got, err := snap.ListPodSandbox(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, s := range got {
			seen[s.GetId()] = true
		}
		oldest := clk.Now().Add(-bound)
		for id, at := range created {
			if at.Before(oldest) && !seen[id] {
				t.Fatalf("step %d: sandbox created %v before the List is missing: the answer is older than the bound %v",
					i, clk.Now().Sub(at), bound)
			}
		}
	}
	if calls := srv.Runtime().Calls("ListPodSandbox"); calls >= 300 {
		t.Fatalf("%d runtime calls for 300 Lists: the snapshot was never used", calls)
	}
}

// Past half its life a snapshot is still served at once while a refresh runs
// in the background; past its bound it is not served at all.
func TestSnapshotRefreshAhead(t *testing.T) {
	const bound = time.Second
	srv := startSim(t)
	rt := srv.Runtime()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	c, err := criclient.Dial(context.Background(), srv.Endpoint(), criclient.WithClock(clk), criclient.WithListSnapshots(bound))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	if _, err := c.ListContainers(ctx, nil); err != nil {
		t.Fatal(err)
	}
	clk.Step(bound / 2)
	if _, err := c.ListContainers(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := rt.Calls("ListContainers"); got != 1 {
		t.Fatalf("a snapshot at half its life caused %d runtime calls, want 1", got)
	}

	rt.HangNext("ListContainers", 1) // the background refresh will hang
	clk.Step(bound / 4)
	for range 3 {
		if _, err := c.ListContainers(ctx, nil); err != nil {
			t.Fatalf("List while a background refresh hangs: %v", err)
		}
	}
	eventually(t, "the background refresh", func() bool { return rt.InFlight("ListContainers") == 1 })
	if got := rt.Calls("ListContainers"); got != 2 {
		t.Fatalf("%d runtime calls, want 2 (one background refresh)", got)
	}

	clk.Step(bound/4 + time.Nanosecond) // the snapshot is now older than the bound
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := c.ListContainers(short, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("List with an expired snapshot and a hung refresh = %v, want to wait for the refresh", err)
	}
}

// A refresh that takes longer than the bound produces a snapshot that is
// already too old when it returns: its age counts from the refresh start.
func TestSnapshotAgeCountsFromRefreshStart(t *testing.T) {
	const bound = time.Second
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	srv := startSim(t, crisim.WithClock(clk), crisim.WithLatency("ListContainers", crisim.Fixed(3*bound)))
	rt := srv.Runtime()
	c := dial(t, srv, criclient.WithClock(clk), criclient.WithListSnapshots(bound))

	list := func() {
		done := make(chan error, 1)
		go func() { _, err := c.ListContainers(context.Background(), nil); done <- err }()
		eventually(t, "the refresh to reach the runtime", func() bool { return rt.InFlight("ListContainers") == 1 && clk.HasWaiters() })
		clk.Step(3 * bound)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	list()
	// The snapshot returned at start+3s; it is 3s old, not 0s.
	list()
	if got := rt.Calls("ListContainers"); got != 2 {
		t.Fatalf("%d runtime calls, want 2: a snapshot older than the bound was served", got)
	}
}

func TestSnapshotInvalidatedByMutation(t *testing.T) {
	srv := startSim(t)
	rt := srv.Runtime()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	c := dial(t, srv, criclient.WithClock(clk), criclient.WithListSnapshots(time.Hour))
	ctx := context.Background()

	if got, err := c.ListContainers(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("ListContainers = %v, %v", got, err)
	}
	sb, err := c.RunPodSandbox(ctx, sandboxConfig("p"), "")
	if err != nil {
		t.Fatal(err)
	}
	sandboxes, err := c.ListPodSandbox(ctx, nil)
	if err != nil || len(sandboxes) != 1 || sandboxes[0].GetId() != sb {
		t.Fatalf("ListPodSandbox after RunPodSandbox = %v, %v", sandboxes, err)
	}
	id, err := c.CreateContainer(ctx, sb, containerConfig("web"), sandboxConfig("p"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ListContainers(ctx, nil)
	if err != nil || len(got) != 1 || got[0].GetId() != id {
		t.Fatalf("ListContainers after CreateContainer = %v, %v", got, err)
	}
	before := rt.Calls("ListContainers")
	if _, err := c.ListContainers(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if rt.Calls("ListContainers") != before {
		t.Fatal("an unchanged snapshot was not reused")
	}
	// A mutation drops only the lists it can change.
	sandboxCalls := rt.Calls("ListPodSandbox")
	if _, err := c.RunPodSandbox(ctx, sandboxConfig("q"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListContainers(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if rt.Calls("ListContainers") != before {
		t.Fatal("RunPodSandbox dropped the container snapshot")
	}
	if _, err := c.ListPodSandbox(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if rt.Calls("ListPodSandbox") != sandboxCalls+1 {
		t.Fatal("RunPodSandbox did not drop the sandbox snapshot")
	}
	if err := c.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListContainers(ctx, nil); err != nil { // a snapshot with the container running
		t.Fatal(err)
	}
	if err := c.StopPodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	exited, err := c.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}})
	if err != nil || len(exited) != 1 {
		t.Fatalf("after StopPodSandbox the container list is stale: %v, %v", exited, err)
	}
	before = rt.Calls("ListContainers")
	// A failed mutation also invalidates: it may have been applied in part.
	if err := c.StartContainer(ctx, "no-such-container"); status.Code(err) != codes.NotFound {
		t.Fatalf("StartContainer(unknown) = %v", err)
	}
	if _, err := c.ListContainers(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if rt.Calls("ListContainers") != before+1 {
		t.Fatal("a failed mutation did not invalidate the snapshot")
	}
}

// Changes the client did not make (a container exiting) show up once the
// snapshot is older than the bound, and not later.
func TestSnapshotSeesExternalChangesAfterBound(t *testing.T) {
	const bound = time.Second
	srv := startSim(t)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	c := dial(t, srv, criclient.WithClock(clk), criclient.WithListSnapshots(bound))
	ctx := context.Background()
	sb, err := c.RunPodSandbox(ctx, sandboxConfig("p"), "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.CreateContainer(ctx, sb, containerConfig("web"), sandboxConfig("p"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	running := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	if got, _ := c.ListContainers(ctx, running); len(got) != 1 {
		t.Fatalf("running containers = %v", got)
	}
	if err := srv.Runtime().ExitContainer(id, 3); err != nil {
		t.Fatal(err)
	}
	clk.Step(bound + time.Nanosecond)
	got, err := c.ListContainers(ctx, running)
	if err != nil || len(got) != 0 {
		t.Fatalf("a snapshot older than the bound was served: %v, %v", got, err)
	}
}

func TestSnapshotFiltersMatchRuntime(t *testing.T) {
	srv := startSim(t)
	ctx := context.Background()
	direct := dial(t, srv)
	snap := dial(t, srv, criclient.WithListSnapshots(time.Hour))

	var sandboxIDs, containerIDs []string
	for _, pod := range []string{"a", "b", "c"} {
		sb, err := direct.RunPodSandbox(ctx, sandboxConfig(pod), "")
		if err != nil {
			t.Fatal(err)
		}
		sandboxIDs = append(sandboxIDs, sb)
		if pod == "c" {
			continue // a sandbox without containers
		}
		for _, name := range []string{"web", "db"} {
			id, err := direct.CreateContainer(ctx, sb, containerConfig(name), sandboxConfig(pod))
			if err != nil {
				t.Fatal(err)
			}
			containerIDs = append(containerIDs, id)
			if name == "web" {
				if err := direct.StartContainer(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := direct.StopPodSandbox(ctx, sandboxIDs[1]); err != nil {
		t.Fatal(err)
	}

	state := func(s runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
		return &runtimeapi.ContainerStateValue{State: s}
	}
	containerFilters := []*runtimeapi.ContainerFilter{
		nil,
		{},
		{Id: containerIDs[0]},
		{Id: containerIDs[2][:12]}, // unique prefix
		{Id: "nope"},
		{State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)},
		{State: state(runtimeapi.ContainerState_CONTAINER_CREATED)},
		{State: state(runtimeapi.ContainerState_CONTAINER_EXITED)},
		{PodSandboxId: sandboxIDs[0]},
		{PodSandboxId: sandboxIDs[0][:10]}, // prefix: resolved by the runtime
		{PodSandboxId: sandboxIDs[2]},      // a sandbox without containers
		{PodSandboxId: sandboxIDs[0], State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)},
		{LabelSelector: map[string]string{"app": "db"}},
		{LabelSelector: map[string]string{"app": "db", "io.kubernetes.pod.name": "x"}},
		{Id: containerIDs[1], PodSandboxId: sandboxIDs[1]},
	}
	for i, f := range containerFilters {
		want, err := direct.ListContainers(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := snap.ListContainers(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if w, g := ids(want), ids(got); !slices.Equal(w, g) {
			t.Errorf("container filter %d %v: snapshot %v, runtime %v", i, f, g, w)
		}
	}
	sandboxFilters := []*runtimeapi.PodSandboxFilter{
		nil,
		{Id: sandboxIDs[1]},
		{Id: sandboxIDs[2][:8]},
		{Id: "zz"},
		{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}},
		{LabelSelector: map[string]string{"io.kubernetes.pod.name": "c"}},
	}
	for i, f := range sandboxFilters {
		want, err := direct.ListPodSandbox(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := snap.ListPodSandbox(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var w, g []string
		for _, s := range want {
			w = append(w, s.GetId())
		}
		for _, s := range got {
			g = append(g, s.GetId())
		}
		slices.Sort(w)
		slices.Sort(g)
		if !slices.Equal(w, g) {
			t.Errorf("sandbox filter %d %v: snapshot %v, runtime %v", i, f, g, w)
		}
	}
}

func ids(cs []*runtimeapi.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.GetId())
	}
	slices.Sort(out)
	return out
}

func TestSnapshotErrorsAreNotCached(t *testing.T) {
	srv := startSim(t)
	rt := srv.Runtime()
	c := dial(t, srv, criclient.WithListSnapshots(time.Hour))
	rt.FailNext("ListContainers", 1, status.Error(codes.Unavailable, "store busy"))
	_, err := c.ListContainers(context.Background(), nil)
	var ce *criclient.CallError
	if status.Code(err) != codes.Unavailable || !errors.As(err, &ce) || ce.Method != "ListContainers" {
		t.Fatalf("ListContainers = %v, want an Unavailable CallError", err)
	}
	if _, err := c.ListContainers(context.Background(), nil); err != nil {
		t.Fatalf("the failure was cached: %v", err)
	}
	if got := rt.Calls("ListContainers"); got != 2 {
		t.Fatalf("%d runtime calls, want 2", got)
	}
}

// One caller giving up does not fail the others waiting on the same refresh.
func TestSnapshotCallerCancelLeavesOthers(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	srv := startSim(t, crisim.WithClock(clk), crisim.WithLatency("ListContainers", crisim.Fixed(time.Second)))
	rt := srv.Runtime()
	c := dial(t, srv, criclient.WithListSnapshots(time.Minute))

	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := c.ListContainers(ctx, nil); first <- err }()
	eventually(t, "the refresh", func() bool { return rt.InFlight("ListContainers") == 1 })
	other := make(chan error, 1)
	go func() { _, err := c.ListContainers(context.Background(), nil); other <- err }()
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller = %v", err)
	}
	// Step while the other caller waits rather than once: a waiter on the
	// clock is not proof that it is the refresh's latency timer, and one
	// step taken before that timer exists would leave the refresh waiting
	// out the per-call timeout. Every step is a runtime second, so the
	// refresh still answers only once its latency has passed.
	var otherErr error
	eventually(t, "the other caller to get the refresh's answer", func() bool {
		select {
		case otherErr = <-other:
			return true
		default:
			if clk.HasWaiters() {
				clk.Step(time.Second)
			}
			return false
		}
	})
	if otherErr != nil {
		t.Fatalf("the other caller failed: %v", otherErr)
	}
	if got := rt.Calls("ListContainers"); got != 1 {
		t.Fatalf("%d runtime calls, want 1", got)
	}
}

func TestCloseEndsWaitingRefresh(t *testing.T) {
	srv := startSim(t)
	rt := srv.Runtime()
	c, err := criclient.Dial(context.Background(), srv.Endpoint(), criclient.WithListSnapshots(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	rt.HangNext("ListPodSandbox", 1)
	done := make(chan error, 1)
	go func() { _, err := c.ListPodSandbox(context.Background(), nil); done <- err }()
	eventually(t, "the refresh", func() bool { return rt.InFlight("ListPodSandbox") == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("a List waiting on a refresh succeeded after Close")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListPodSandbox(context.Background(), nil); !errors.Is(err, criclient.ErrClosed) {
		t.Fatalf("List after Close = %v", err)
	}
}

func TestCloseEndsCallsInFlight(t *testing.T) {
	srv := startSim(t)
	rt := srv.Runtime()
	c, err := criclient.Dial(context.Background(), srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	rt.HangNext("Status", 1)
	done := make(chan error, 1)
	go func() { _, err := c.Status(context.Background(), false); done <- err }()
	eventually(t, "the call to hang", func() bool { return rt.InFlight("Status") == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, criclient.ErrClosed) {
		t.Fatalf("call cut by Close = %v, want ErrClosed", err)
	}
}
