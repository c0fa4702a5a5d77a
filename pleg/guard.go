package pleg

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// guarded turns a panic of the Runtime (a zero-value fake, a nil map inside
// it) into the failing call's error: the PLEG calls it from its own
// goroutines, where a panic would kill the process.
type guarded struct{ rt Runtime }

func recovered(method string, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("pleg: %s panicked: %v", method, p)
	}
}

func (g guarded) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) (_ []*runtimeapi.PodSandbox, err error) {
	defer recovered("ListPodSandbox", &err)
	return g.rt.ListPodSandbox(ctx, f)
}

func (g guarded) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) (_ []*runtimeapi.Container, err error) {
	defer recovered("ListContainers", &err)
	return g.rt.ListContainers(ctx, f)
}

func (g guarded) PodSandboxStatus(ctx context.Context, id string, verbose bool) (_ *runtimeapi.PodSandboxStatusResponse, err error) {
	defer recovered("PodSandboxStatus", &err)
	return g.rt.PodSandboxStatus(ctx, id, verbose)
}

func (g guarded) ContainerStatus(ctx context.Context, id string, verbose bool) (_ *runtimeapi.ContainerStatusResponse, err error) {
	defer recovered("ContainerStatus", &err)
	return g.rt.ContainerStatus(ctx, id, verbose)
}

func (g guarded) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) (err error) {
	defer recovered("GetContainerEvents", &err)
	return g.rt.GetContainerEvents(ctx, ch, opened)
}
