package criclient_test

import (
	"context"
	"errors"
	"testing"

	"github.com/syncpod/syncpod/criclient"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestGetContainerEvents(t *testing.T) {
	srv := startSim(t)
	c := dial(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	events := make(chan *runtimeapi.ContainerEventResponse, 16)
	established := make(chan struct{})
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- c.GetContainerEvents(ctx, events, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
	}()
	<-established
	eventually(t, "the subscription", func() bool { return srv.Runtime().Subscribers() == 1 })

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
	want := []runtimeapi.ContainerEventType{runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT}
	for len(want) > 0 {
		ev := <-events
		if ev.GetContainerId() != id {
			continue // sandbox events
		}
		if ev.GetContainerEventType() != want[0] {
			t.Fatalf("event %v, want %v", ev.GetContainerEventType(), want[0])
		}
		if ev.GetPodSandboxStatus().GetId() != sb {
			t.Fatalf("event without its sandbox status: %v", ev)
		}
		want = want[1:]
	}
	cancel()
	err = <-streamDone
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Fatalf("GetContainerEvents after cancel = %v", err)
	}
	var ce *criclient.CallError
	if !errors.As(err, &ce) || ce.Method != "GetContainerEvents" {
		t.Fatalf("error %v does not name the method", err)
	}
}

func TestGetContainerEventsStreamCut(t *testing.T) {
	srv := startSim(t)
	c := dial(t, srv)
	srv.Runtime().CutEventStreamsAfter(1)
	events := make(chan *runtimeapi.ContainerEventResponse, 16)
	done := make(chan error, 1)
	go func() { done <- c.GetContainerEvents(context.Background(), events, nil) }()
	eventually(t, "the subscription", func() bool { return srv.Runtime().Subscribers() == 1 })
	if _, err := c.RunPodSandbox(context.Background(), sandboxConfig("p"), ""); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("cut stream returned %v", err)
	}
	if len(events) != 1 {
		t.Fatalf("%d events delivered before the cut, want 1", len(events))
	}
}

func TestGetContainerEventsBlockedSendEndsOnCancel(t *testing.T) {
	srv := startSim(t)
	c := dial(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan *runtimeapi.ContainerEventResponse) // nobody reads
	done := make(chan error, 1)
	go func() { done <- c.GetContainerEvents(ctx, events, nil) }()
	eventually(t, "the subscription", func() bool { return srv.Runtime().Subscribers() == 1 })
	if _, err := c.RunPodSandbox(context.Background(), sandboxConfig("p"), ""); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("GetContainerEvents = %v, want context.Canceled", err)
	}
}
