package crisim_test

import (
	"context"
	"sync"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
)

type evKey struct {
	id string
	t  runtimeapi.ContainerEventType
}

func TestEventsCarryStatusesLikeContainerd(t *testing.T) {
	n := startNode(t, crisim.WithImage(busybox, 1))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	s1 := n.events(t, ctx)
	s2 := n.events(t, ctx)

	sb := n.runSandbox(t, "p")
	c := n.createContainer(t, sb, "c", busybox, nil)
	if _, err := n.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	want := []evKey{
		{sb, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{c, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{c, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
	}
	for si, s := range []runtimeapi.RuntimeService_GetContainerEventsClient{s1, s2} {
		var last int64
		for i, w := range want {
			ev := recvEvent(t, s)
			if ev.ContainerId != w.id || ev.ContainerEventType != w.t {
				t.Fatalf("stream %d event %d = %s %v, want %s %v", si, i, ev.ContainerId, ev.ContainerEventType, w.id, w.t)
			}
			if ev.PodSandboxStatus == nil || ev.PodSandboxStatus.Id != sb || ev.PodSandboxStatus.Metadata.GetUid() != "uid-p" {
				t.Fatalf("event %d: PodSandboxStatus = %v", i, ev.PodSandboxStatus)
			}
			if ev.CreatedAt < last {
				t.Fatalf("event %d: CreatedAt went backwards", i)
			}
			last = ev.CreatedAt
			switch {
			case w.id == c && w.t == runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
				if len(ev.ContainersStatuses) != 1 || ev.ContainersStatuses[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
					t.Fatalf("STARTED statuses = %v", ev.ContainersStatuses)
				}
			case w.id == c && w.t == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
				if len(ev.ContainersStatuses) != 1 || ev.ContainersStatuses[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
					t.Fatalf("STOPPED statuses = %v", ev.ContainersStatuses)
				}
			case w.id == sb && w.t == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
				if ev.PodSandboxStatus.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || len(ev.ContainersStatuses) != 0 {
					t.Fatalf("sandbox DELETED = %v", ev)
				}
			}
		}
	}
}

func TestSlowSubscriberLosesEventsAndNeverBlocks(t *testing.T) {
	n := startNode(t, crisim.WithEventBuffer(2))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	// A stream nobody reads: its buffer (2) plus what gRPC flow control
	// absorbs fills up; the runtime must still make progress.
	n.events(t, ctx)
	for i := range 2000 {
		n.runSandbox(t, "p"+itoa(i))
	}
	if full, _ := n.rt.EventsLost(); full == 0 {
		t.Fatalf("EventsLost bufferFull = 0 after 4000 unread events, want > 0")
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}

func TestEventTimesNeverDecreaseUnderConcurrency(t *testing.T) {
	n := startNode(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	s := n.events(t, ctx)
	const pods = 20
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() { n.runSandbox(t, "p"+itoa(i)) })
	}
	wg.Wait()
	var last int64
	for i := range 2 * pods {
		ev := recvEvent(t, s)
		if ev.CreatedAt < last {
			t.Fatalf("event %d CreatedAt %d < previous %d", i, ev.CreatedAt, last)
		}
		last = ev.CreatedAt
	}
}

// EventsSent counts one delivery per event and subscriber, so a consumer
// that received as many has them all.
func TestEventsSentCountsDeliveries(t *testing.T) {
	n := startNode(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	a, b := n.events(t, ctx), n.events(t, ctx)
	if got := n.rt.EventsSent(); got != 0 {
		t.Fatalf("EventsSent before any event = %d, want 0", got)
	}
	n.runSandbox(t, "p") // CREATED and STARTED
	for _, s := range []runtimeapi.RuntimeService_GetContainerEventsClient{a, b} {
		for range 2 {
			if _, err := s.Recv(); err != nil {
				t.Fatalf("Recv: %v", err)
			}
		}
	}
	if got := n.rt.EventsSent(); got != 4 {
		t.Fatalf("EventsSent after two events to two streams = %d, want 4", got)
	}
}
