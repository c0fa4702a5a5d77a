package shim

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sandboxStatusFromView returns the held status of sandbox id when the
// view lists it and the held status is at least as new as the view's
// state. A nil status with a nil error means the call must be forwarded;
// listed says whether the view knows the id (then the forwarded answer is
// kept). Past the staleness bound the held status is answered as Lists
// are (with Config.FailStaleReads the read fails at once, as Lists do).
func (s *Shim) sandboxStatusFromView(ctx context.Context, id string) (st *runtimeapi.PodSandboxStatus, listed bool, err error) {
	if s.draining() {
		return nil, false, status.Error(codes.Unavailable, ErrDraining.Error())
	}
	if err := s.statuses.awaitWrites(ctx, &objKey{objSandbox, id}); err != nil {
		return nil, false, viewError(err)
	}
	began := s.cfg.Clock.Now()
	items, err := s.view.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: id})
	s.waits.viewWait(s.cfg.Clock.Since(began))
	if err != nil {
		return nil, false, viewError(err)
	}
	if len(items) != 1 || items[0].GetId() != id {
		return nil, false, nil
	}
	st, _ = s.statuses.sandbox(id, sandboxRank(items[0].GetState()))
	return st, true, nil
}

// containerStatusFromView is sandboxStatusFromView for a container.
func (s *Shim) containerStatusFromView(ctx context.Context, id string) (st *runtimeapi.ContainerStatus, listed bool, err error) {
	if s.draining() {
		return nil, false, status.Error(codes.Unavailable, ErrDraining.Error())
	}
	if err := s.statuses.awaitWrites(ctx, &objKey{objContainer, id}); err != nil {
		return nil, false, viewError(err)
	}
	began := s.cfg.Clock.Now()
	items, err := s.view.ListContainers(ctx, &runtimeapi.ContainerFilter{Id: id})
	s.waits.viewWait(s.cfg.Clock.Since(began))
	if err != nil {
		return nil, false, viewError(err)
	}
	if len(items) != 1 || items[0].GetId() != id {
		return nil, false, nil
	}
	st, _ = s.statuses.container(id, containerRank(items[0].GetState()))
	return st, true, nil
}

// runtimeDown is the Status answer while the view is stale: the runtime
// is not answering, so it is not ready, whatever it said last.
func (s *Shim) runtimeDown(why error) *runtimeapi.StatusResponse {
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}}
	if last := s.lastStatus.Load(); last != nil {
		resp = proto.Clone(last).(*runtimeapi.StatusResponse)
	}
	down := &runtimeapi.RuntimeCondition{
		Type: runtimeapi.RuntimeReady, Status: false,
		Reason: "RuntimeUnresponsive", Message: "crishim: " + why.Error(),
	}
	conds := resp.Status.GetConditions()[:0]
	for _, c := range resp.Status.GetConditions() {
		if c.GetType() != runtimeapi.RuntimeReady {
			conds = append(conds, c)
		}
	}
	if resp.Status == nil {
		resp.Status = &runtimeapi.RuntimeStatus{}
	}
	resp.Status.Conditions = append([]*runtimeapi.RuntimeCondition{down}, conds...)
	return resp
}
