package criclient_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"
)

type recordingObserver struct {
	mu       sync.Mutex
	admitted []criclient.Event
	finished []criclient.Event
	hits     map[string][]time.Duration
}

func (r *recordingObserver) observe(e criclient.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Kind {
	case criclient.CallAdmitted:
		r.admitted = append(r.admitted, e)
	case criclient.CallFinished:
		r.finished = append(r.finished, e)
	case criclient.SnapshotServed:
		if r.hits == nil {
			r.hits = map[string][]time.Duration{}
		}
		r.hits[e.Method] = append(r.hits[e.Method], e.Age)
	}
}

func TestObserverSeesQueueWaitLatencyAndErrors(t *testing.T) {
	srv := startSim(t)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	rec := &recordingObserver{}
	c := dial(t, srv, criclient.WithClock(clk), criclient.WithoutVersionCheck(), criclient.WithObserver(rec.observe),
		criclient.WithAdmission(criclient.ClassRead, criclient.Limits{QPS: 1, Burst: 1}))
	ctx := context.Background()

	if _, err := c.Status(ctx, false); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := c.ContainerStatus(ctx, "no-such-container", false); done <- err }()
	eventually(t, "the second call to queue", clk.HasWaiters)
	clk.Step(time.Second)
	if err := <-done; status.Code(err) != codes.NotFound {
		t.Fatalf("ContainerStatus = %v", err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.admitted) != 2 || len(rec.finished) != 2 {
		t.Fatalf("admitted %d, finished %d, want 2 and 2", len(rec.admitted), len(rec.finished))
	}
	first, second := rec.finished[0], rec.finished[1]
	if first.Method != "Status" || first.Class != criclient.ClassRead || first.QueueWait != 0 || first.Err != nil {
		t.Errorf("first call = %+v", first)
	}
	if second.Method != "ContainerStatus" || second.QueueWait != time.Second || status.Code(second.Err) != codes.NotFound {
		t.Errorf("second call = %+v, want a 1s queue wait and NotFound", second)
	}
	if rec.admitted[1].InFlight != 1 || second.InFlight != 0 {
		t.Errorf("in-flight admitted %d / finished %d, want 1 / 0", rec.admitted[1].InFlight, second.InFlight)
	}
}

func TestErrorsKeepStatusCodes(t *testing.T) {
	srv := startSim(t)
	c := dial(t, srv)
	ctx := context.Background()
	_, err := c.ContainerStatus(ctx, "no-such-container", false)
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.NotFound {
		t.Fatalf("status.FromError(%v) = %v, %v", err, st, ok)
	}
	if _, err := c.RunPodSandbox(ctx, sandboxConfig("dup"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunPodSandbox(ctx, sandboxConfig("dup"), ""); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("duplicate RunPodSandbox = %v", err)
	}
	if _, err := c.RunPodSandbox(ctx, nil, ""); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("RunPodSandbox(nil) = %v", err)
	}
}

func TestSnapshotObserverSeesHits(t *testing.T) {
	srv := startSim(t)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	obs := &recordingObserver{}
	c := dial(t, srv, criclient.WithClock(clk), criclient.WithObserver(obs.observe), criclient.WithListSnapshots(time.Minute))
	ctx := context.Background()
	for range 3 {
		if _, err := c.ListContainers(ctx, nil); err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Second)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if got := obs.hits["ListContainers"]; len(got) != 2 || got[0] != time.Second || got[1] != 2*time.Second {
		t.Fatalf("snapshot hits = %v, want ages [1s 2s]", got)
	}
	refreshes := 0
	for _, i := range obs.finished {
		if i.Method == "ListContainers" {
			refreshes++
		}
	}
	if refreshes != 1 {
		t.Fatalf("%d observed ListContainers runtime calls, want 1 refresh", refreshes)
	}
}
