package criclient_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/internal/testnode"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestRealNodeLifecycle drives containerd 2.4.2 through criclient: Version,
// a pull from the loopback registry, a sandbox and a container through
// their whole life, Lists with filters (direct and from a snapshot), and the
// matching GetContainerEvents.
func TestRealNodeLifecycle(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "syncpod/criclient-app", testnode.WithSize(1<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	c, err := criclient.Dial(ctx, n.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	snap, err := criclient.Dial(ctx, n.Endpoint, criclient.WithListSnapshots(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()

	v, err := c.Version(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if v.GetRuntimeName() != "containerd" || v.GetRuntimeApiVersion() != "v1" {
		t.Fatalf("Version = %v", v)
	}

	// Events, from before anything happens.
	events := make(chan *runtimeapi.ContainerEventResponse, 100)
	evCtx, stopEvents := context.WithCancel(ctx)
	established := make(chan struct{})
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- c.GetContainerEvents(evCtx, events, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
	}()
	defer func() {
		stopEvents()
		if err := <-streamDone; status.Code(err) != codes.Canceled {
			t.Errorf("GetContainerEvents ended with %v, want Canceled", err)
		}
	}()
	<-established

	ref, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: img}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ref == "" {
		t.Fatal("PullImage returned an empty reference")
	}
	if st, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: img}, false); err != nil || st.GetImage() == nil {
		t.Fatalf("ImageStatus after pull = %v, %v", st, err)
	}

	sbCfg := n.SandboxConfig("criclient", "uid-criclient")
	sb, err := c.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := n.ContainerConfig("app", img, "pause")
	id, err := c.CreateContainer(ctx, sb, cfg, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}

	state := func(s runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
		return &runtimeapi.ContainerStateValue{State: s}
	}
	for _, tc := range []struct {
		filter *runtimeapi.ContainerFilter
		want   bool
	}{
		{nil, true},
		{&runtimeapi.ContainerFilter{Id: id}, true},
		{&runtimeapi.ContainerFilter{Id: id[:12]}, true},
		{&runtimeapi.ContainerFilter{PodSandboxId: sb}, true},
		{&runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}, true},
		{&runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_EXITED)}, false},
		{&runtimeapi.ContainerFilter{LabelSelector: cfg.GetLabels()}, true},
		{&runtimeapi.ContainerFilter{LabelSelector: map[string]string{"no-such-label": "x"}}, false},
	} {
		direct, err := c.ListContainers(ctx, tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.ContainsFunc(direct, func(x *runtimeapi.Container) bool { return x.GetId() == id }); got != tc.want {
			t.Errorf("ListContainers(%v) holds the container: %v, want %v", tc.filter, got, tc.want)
		}
		fromSnapshot, err := snap.ListContainers(ctx, tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		if d, s := ids(direct), ids(fromSnapshot); !slices.Equal(d, s) {
			t.Errorf("ListContainers(%v): snapshot %v, containerd %v", tc.filter, s, d)
		}
	}
	pods, err := snap.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		Id:    sb,
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil || len(pods) != 1 || pods[0].GetId() != sb {
		t.Fatalf("ListPodSandbox(ready, %s) = %v, %v", sb, pods, err)
	}

	if err := c.StopContainer(ctx, id, 10); err != nil {
		t.Fatal(err)
	}
	st, err := c.ContainerStatus(ctx, id, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("ContainerStatus after stop = %v, %v", st, err)
	}
	if err := c.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ContainerStatus(ctx, id, false); status.Code(err) != codes.NotFound {
		t.Fatalf("ContainerStatus after remove = %v, want NotFound", err)
	}

	// The container's events arrive in order, with the pod's status.
	want := []runtimeapi.ContainerEventType{
		runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT,
	}
	for len(want) > 0 {
		select {
		case ev := <-events:
			if ev.GetContainerId() != id {
				continue // sandbox events
			}
			if ev.GetContainerEventType() != want[0] {
				t.Fatalf("event %v for the container, want %v", ev.GetContainerEventType(), want[0])
			}
			if ev.GetPodSandboxStatus().GetId() != sb {
				t.Fatalf("%v event without the pod's sandbox status", ev.GetContainerEventType())
			}
			want = want[1:]
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %v", want)
		}
	}

	if err := c.StopPodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := c.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if pods, err := c.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: sb}); err != nil || len(pods) != 0 {
		t.Fatalf("ListPodSandbox after remove = %v, %v", pods, err)
	}
}
