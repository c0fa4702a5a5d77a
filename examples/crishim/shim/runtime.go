package shim

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Version forwards, and keeps the runtime's answer. Once it has one, a
// Version the runtime does not answer within the staleness bound (or any
// Version past the bound) gets that answer instead: a runtime's name and
// version do not change while it runs, and the kubelet's node status asks
// for them on every update, so a forwarded call held by a frozen runtime
// would hold the Node's status, its Ready condition included, for the
// kubelet's 2-minute runtime timeout.
func (s *Shim) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	last := s.lastVersion.Load()
	if last != nil && s.view.Health() != nil && !s.draining() {
		return proto.Clone(last).(*runtimeapi.VersionResponse), nil
	}
	cctx, cancel := s.boundCall(ctx, last != nil)
	defer cancel()
	resp, err := forward(s, cctx, "Version", req, s.rt.Version)
	switch {
	case err == nil:
		s.lastVersion.Store(resp)
	case last != nil && s.timedOut(ctx, cctx, err):
		return proto.Clone(last).(*runtimeapi.VersionResponse), nil
	}
	return resp, err
}

// Status forwards while the view is within its staleness bound, and waits
// for the runtime's answer at most that bound. Past it, or when the
// runtime does not answer in time, the shim answers at once, with
// RuntimeReady false (reason RuntimeUnresponsive, why as message) and the
// other conditions as the runtime last reported them, rather than pretend
// the runtime is ready or hold the kubelet's call: the kubelet checks its
// runtime with one Status call at a time, so a call held by a frozen
// runtime would keep it from learning that the runtime is down. Verbose
// calls always forward.
func (s *Shim) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	if req.GetVerbose() {
		return forward(s, ctx, "Status", req, s.rt.Status)
	}
	if err := s.view.Health(); err != nil && !s.draining() {
		return s.runtimeDown(err), nil
	}
	cctx, cancel := s.boundCall(ctx, true)
	defer cancel()
	resp, err := forward(s, cctx, "Status", req, s.rt.Status)
	switch {
	case err == nil:
		s.lastStatus.Store(resp)
	case s.timedOut(ctx, cctx, err):
		return s.runtimeDown(fmt.Errorf("Status not answered within %v", s.bound)), nil
	}
	return resp, err
}

// timedOut says whether a call made with cctx (boundCall of ctx) failed
// because the bound passed, not the caller's context or a drain. gRPC can
// return DeadlineExceeded a moment before cctx reports it, so the code
// counts too.
func (s *Shim) timedOut(ctx, cctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || s.draining() {
		return false
	}
	return cctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded
}

// boundCall returns ctx bounded by the staleness bound when bounded.
func (s *Shim) boundCall(ctx context.Context, bounded bool) (context.Context, context.CancelFunc) {
	if !bounded {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.bound)
}

// RuntimeConfig forwards.
func (s *Shim) RuntimeConfig(ctx context.Context, req *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return forward(s, ctx, "RuntimeConfig", req, s.rt.RuntimeConfig)
}

// UpdateRuntimeConfig forwards.
func (s *Shim) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return forward(s, ctx, "UpdateRuntimeConfig", req, s.rt.UpdateRuntimeConfig)
}

// RunPodSandbox forwards, or in async mode validates, queues and returns a
// sandbox id minted by the shim. In the synchronous modes a call the
// runtime has goes on when its caller gives up, and a retry with the same
// metadata and config joins it or gets the sandbox it created (see the
// package documentation): the kubelet retries with the same attempt when
// it saw no sandbox, which the runtime would refuse as a reserved name.
func (s *Shim) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	if s.async != nil {
		return s.async.run(ctx, req)
	}
	return s.runs.run(ctx, req)
}

// StopPodSandbox forwards. In async mode a sandbox whose creation failed
// has nothing to stop: the call succeeds.
func (s *Shim) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	id, failed, err := s.lifecycleSandbox(ctx, req.GetPodSandboxId())
	if err != nil || failed {
		return &runtimeapi.StopPodSandboxResponse{}, err
	}
	r := &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}
	running := s.statuses.runningIn(id)
	resp, err := forward(s, ctx, "StopPodSandbox", r, s.rt.StopPodSandbox)
	s.statuses.wrote(objKey{objSandbox, id}, "", sandboxRank(runtimeapi.PodSandboxState_SANDBOX_NOTREADY), err)
	for _, cid := range running { // stopping the sandbox stopped them
		s.statuses.wrote(objKey{objContainer, cid}, id, containerRank(runtimeapi.ContainerState_CONTAINER_EXITED), err)
	}
	return resp, err
}

// RemovePodSandbox forwards. In async mode removing a sandbox whose
// creation failed forgets it.
func (s *Shim) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	id, failed, err := s.lifecycleSandbox(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if failed {
		s.async.forget(req.GetPodSandboxId())
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	r := &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}
	resp, err := forward(s, ctx, "RemovePodSandbox", r, s.rt.RemovePodSandbox)
	if err == nil {
		s.view.SandboxRemoved(id)
		s.statuses.removed(objKey{objSandbox, id})
		if s.async != nil {
			s.async.forget(req.GetPodSandboxId())
		}
		if s.runs != nil {
			s.runs.removed(id)
		}
	} else {
		s.statuses.changedUnseen(objKey{objSandbox, id}, "")
	}
	return resp, err
}

// PodSandboxStatus answers a non-verbose call for a sandbox the view lists
// from the last status the shim saw (see the package documentation);
// verbose calls and unknown ids are forwarded. In async mode a sandbox
// still being created is reported READY without network status, one whose
// creation failed NOTREADY.
func (s *Shim) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	if s.async != nil {
		if st, ok := s.async.status(req.GetPodSandboxId(), req.GetVerbose()); ok {
			return st, nil
		}
	}
	r, id := req, s.realSandbox(req.GetPodSandboxId())
	if id != req.GetPodSandboxId() {
		r = &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: req.GetVerbose()}
	}
	var listed bool
	if !req.GetVerbose() && !s.cfg.PassthroughLists {
		st, known, err := s.sandboxStatusFromView(ctx, id)
		if err != nil {
			return nil, err
		}
		if st != nil {
			resp := &runtimeapi.PodSandboxStatusResponse{Status: st}
			if s.async != nil {
				resp = s.async.editStatus(resp)
			}
			return resp, nil
		}
		listed = known
	}
	resp, err := forward(s, ctx, "PodSandboxStatus", r, s.rt.PodSandboxStatus)
	if err == nil && listed {
		s.statuses.fetchedSandbox(resp.GetStatus())
	}
	if err == nil && s.async != nil {
		resp = s.async.editStatus(resp)
	}
	return resp, err
}

// ListPodSandbox answers from the view (or forwards with PassthroughLists).
func (s *Shim) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	if s.draining() {
		return nil, status.Error(codes.Unavailable, ErrDraining.Error())
	}
	if !s.cfg.PassthroughLists {
		if err := s.statuses.awaitWrites(ctx, nil); err != nil {
			return nil, viewError(err)
		}
	}
	f := req.GetFilter()
	var pending []*runtimeapi.PodSandbox
	if s.async != nil {
		var onlyPending bool
		f, pending, onlyPending = s.async.sandboxFilter(f)
		if onlyPending {
			return &runtimeapi.ListPodSandboxResponse{Items: pending}, nil
		}
	}
	var items []*runtimeapi.PodSandbox
	if s.cfg.PassthroughLists {
		resp, err := forward(s, ctx, "ListPodSandbox", &runtimeapi.ListPodSandboxRequest{Filter: f}, s.rt.ListPodSandbox)
		if err != nil {
			return nil, err
		}
		items = resp.GetItems()
	} else {
		var err error
		began := s.cfg.Clock.Now()
		items, err = s.view.ListPodSandbox(ctx, f)
		s.waits.viewWait(s.cfg.Clock.Since(began))
		if err != nil {
			return nil, viewError(err)
		}
	}
	if s.async != nil {
		items = s.async.editSandboxes(items)
		shown := make(map[string]bool, len(items))
		for _, sb := range items {
			shown[sb.GetId()] = true
		}
		for _, sb := range pending {
			if !shown[sb.GetId()] {
				items = append(items, sb)
			}
		}
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}

// StreamPodSandboxes forwards the backend's stream (Unimplemented where
// the backend has none).
func (s *Shim) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxesResponse]) error {
	return streamForward(s, ss, req, s.rt.StreamPodSandboxes, nil)
}

// CreateContainer forwards. In async mode it first waits for its sandbox
// and fails with the sandbox's own error if its creation failed. A call
// whose caller gave up is not sent, and a container the runtime creates
// after its caller gave up is removed (see the package documentation).
func (s *Shim) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	id, err := s.awaitSandbox(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	r := req
	if id != req.GetPodSandboxId() {
		r = &runtimeapi.CreateContainerRequest{PodSandboxId: id, Config: req.GetConfig(), SandboxConfig: req.GetSandboxConfig()}
	}
	return s.createContainer(ctx, id, r)
}

// StartContainer forwards.
func (s *Shim) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	resp, err := forward(s, ctx, "StartContainer", req, s.rt.StartContainer)
	s.statuses.wrote(objKey{objContainer, req.GetContainerId()}, "", containerRank(runtimeapi.ContainerState_CONTAINER_RUNNING), err)
	return resp, err
}

// StopContainer forwards.
func (s *Shim) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	resp, err := forward(s, ctx, "StopContainer", req, s.rt.StopContainer)
	s.statuses.wrote(objKey{objContainer, req.GetContainerId()}, "", containerRank(runtimeapi.ContainerState_CONTAINER_EXITED), err)
	return resp, err
}

// RemoveContainer forwards.
func (s *Shim) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	resp, err := forward(s, ctx, "RemoveContainer", req, s.rt.RemoveContainer)
	if err == nil {
		s.view.ContainerRemoved(req.GetContainerId())
		s.statuses.removed(objKey{objContainer, req.GetContainerId()})
	} else {
		s.statuses.changedUnseen(objKey{objContainer, req.GetContainerId()}, "")
	}
	return resp, err
}

// ListContainers answers from the view (or forwards with PassthroughLists).
func (s *Shim) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	if s.draining() {
		return nil, status.Error(codes.Unavailable, ErrDraining.Error())
	}
	if !s.cfg.PassthroughLists {
		if err := s.statuses.awaitWrites(ctx, nil); err != nil {
			return nil, viewError(err)
		}
	}
	f := req.GetFilter()
	if s.async != nil && f.GetPodSandboxId() != "" {
		id, ok := s.async.settledReal(f.GetPodSandboxId())
		if !ok { // still being created, or failed: no containers yet
			return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{}}, nil
		}
		if id != f.GetPodSandboxId() {
			f = &runtimeapi.ContainerFilter{Id: f.GetId(), State: f.GetState(), PodSandboxId: id, LabelSelector: f.GetLabelSelector()}
		}
	}
	var items []*runtimeapi.Container
	if s.cfg.PassthroughLists {
		resp, err := forward(s, ctx, "ListContainers", &runtimeapi.ListContainersRequest{Filter: f}, s.rt.ListContainers)
		if err != nil {
			return nil, err
		}
		items = resp.GetContainers()
	} else {
		var err error
		began := s.cfg.Clock.Now()
		items, err = s.view.ListContainers(ctx, f)
		s.waits.viewWait(s.cfg.Clock.Since(began))
		if err != nil {
			return nil, viewError(err)
		}
	}
	items = s.abandoned.filterContainers(items)
	if s.async != nil {
		items = s.async.editContainers(items)
	}
	return &runtimeapi.ListContainersResponse{Containers: items}, nil
}

// StreamContainers forwards the backend's stream.
func (s *Shim) StreamContainers(req *runtimeapi.StreamContainersRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
	return streamForward(s, ss, req, s.rt.StreamContainers, nil)
}

// ContainerStatus answers a non-verbose call for a container the view
// lists from the last status the shim saw (see the package
// documentation); verbose calls and unknown ids are forwarded.
func (s *Shim) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	var listed bool
	if !req.GetVerbose() && !s.cfg.PassthroughLists {
		st, known, err := s.containerStatusFromView(ctx, req.GetContainerId())
		if err != nil {
			return nil, err
		}
		if st != nil {
			return &runtimeapi.ContainerStatusResponse{Status: st}, nil
		}
		listed = known
	}
	resp, err := forward(s, ctx, "ContainerStatus", req, s.rt.ContainerStatus)
	if err == nil && listed {
		s.statuses.fetchedContainer(resp.GetStatus(), "")
	}
	return resp, err
}

// UpdateContainerResources forwards.
func (s *Shim) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	resp, err := forward(s, ctx, "UpdateContainerResources", req, s.rt.UpdateContainerResources)
	s.statuses.changedUnseen(objKey{objContainer, req.GetContainerId()}, "")
	return resp, err
}

// ReopenContainerLog forwards.
func (s *Shim) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	return forward(s, ctx, "ReopenContainerLog", req, s.rt.ReopenContainerLog)
}

// ExecSync forwards.
func (s *Shim) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	return forward(s, ctx, "ExecSync", req, s.rt.ExecSync)
}

// Exec forwards; the streaming URL is the backend's, untouched.
func (s *Shim) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return forward(s, ctx, "Exec", req, s.rt.Exec)
}

// Attach forwards; the streaming URL is the backend's, untouched.
func (s *Shim) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return forward(s, ctx, "Attach", req, s.rt.Attach)
}

// PortForward forwards; the streaming URL is the backend's, untouched.
func (s *Shim) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	id, err := s.awaitSandbox(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	r := req
	if id != req.GetPodSandboxId() {
		r = &runtimeapi.PortForwardRequest{PodSandboxId: id, Port: req.GetPort()}
	}
	return forward(s, ctx, "PortForward", r, s.rt.PortForward)
}

// ContainerStats forwards.
func (s *Shim) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	return forward(s, ctx, "ContainerStats", req, s.rt.ContainerStats)
}

// ListContainerStats forwards.
func (s *Shim) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	if s.async != nil && req.GetFilter().GetPodSandboxId() != "" {
		f := req.GetFilter()
		id, err := s.awaitSandbox(ctx, f.GetPodSandboxId())
		if err != nil {
			return nil, err
		}
		req = &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{Id: f.GetId(), PodSandboxId: id, LabelSelector: f.GetLabelSelector()}}
	}
	return forward(s, ctx, "ListContainerStats", req, s.rt.ListContainerStats)
}

// StreamContainerStats forwards the backend's stream.
func (s *Shim) StreamContainerStats(req *runtimeapi.StreamContainerStatsRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamContainerStatsResponse]) error {
	return streamForward(s, ss, req, s.rt.StreamContainerStats, nil)
}

// PodSandboxStats forwards.
func (s *Shim) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	id, err := s.awaitSandbox(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	r := req
	if id != req.GetPodSandboxId() {
		r = &runtimeapi.PodSandboxStatsRequest{PodSandboxId: id}
	}
	resp, err := forward(s, ctx, "PodSandboxStats", r, s.rt.PodSandboxStats)
	if err == nil && s.async != nil {
		s.async.editStats(resp.GetStats())
	}
	return resp, err
}

// ListPodSandboxStats forwards.
func (s *Shim) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	if s.async != nil && req.GetFilter().GetId() != "" {
		f := req.GetFilter()
		id, err := s.awaitSandbox(ctx, f.GetId())
		if err != nil {
			return nil, err
		}
		req = &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{Id: id, LabelSelector: f.GetLabelSelector()}}
	}
	resp, err := forward(s, ctx, "ListPodSandboxStats", req, s.rt.ListPodSandboxStats)
	if err == nil && s.async != nil {
		for _, st := range resp.GetStats() {
			s.async.editStats(st)
		}
	}
	return resp, err
}

// StreamPodSandboxStats forwards the backend's stream.
func (s *Shim) StreamPodSandboxStats(req *runtimeapi.StreamPodSandboxStatsRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxStatsResponse]) error {
	return streamForward(s, ss, req, s.rt.StreamPodSandboxStats, nil)
}

// CheckpointContainer forwards.
func (s *Shim) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) (*runtimeapi.CheckpointContainerResponse, error) {
	return forward(s, ctx, "CheckpointContainer", req, s.rt.CheckpointContainer)
}

// CheckpointPod forwards.
func (s *Shim) CheckpointPod(ctx context.Context, req *runtimeapi.CheckpointPodRequest) (*runtimeapi.CheckpointPodResponse, error) {
	id, err := s.awaitSandbox(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	r := req
	if id != req.GetPodSandboxId() {
		r = &runtimeapi.CheckpointPodRequest{PodSandboxId: id, OutputPath: req.GetOutputPath(), ContainerIds: req.GetContainerIds(), Options: req.GetOptions()}
	}
	return forward(s, ctx, "CheckpointPod", r, s.rt.CheckpointPod)
}

// RestorePod forwards.
func (s *Shim) RestorePod(ctx context.Context, req *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	resp, err := forward(s, ctx, "RestorePod", req, s.rt.RestorePod)
	if err == nil {
		s.statuses.changedUnseen(objKey{objSandbox, resp.GetPodSandboxId()}, "")
	}
	return resp, err
}

// ListMetricDescriptors forwards.
func (s *Shim) ListMetricDescriptors(ctx context.Context, req *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return forward(s, ctx, "ListMetricDescriptors", req, s.rt.ListMetricDescriptors)
}

// ListPodSandboxMetrics forwards.
func (s *Shim) ListPodSandboxMetrics(ctx context.Context, req *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	resp, err := forward(s, ctx, "ListPodSandboxMetrics", req, s.rt.ListPodSandboxMetrics)
	if err == nil && s.async != nil {
		s.async.editMetrics(resp.GetPodMetrics())
	}
	return resp, err
}

// StreamPodSandboxMetrics forwards the backend's stream.
func (s *Shim) StreamPodSandboxMetrics(req *runtimeapi.StreamPodSandboxMetricsRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxMetricsResponse]) error {
	return streamForward(s, ss, req, s.rt.StreamPodSandboxMetrics, nil)
}

// UpdatePodSandboxResources forwards.
func (s *Shim) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	id, err := s.awaitSandbox(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	r := req
	if id != req.GetPodSandboxId() {
		r = &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: id, Overhead: req.GetOverhead(), Resources: req.GetResources()}
	}
	resp, err := forward(s, ctx, "UpdatePodSandboxResources", r, s.rt.UpdatePodSandboxResources)
	s.statuses.changedUnseen(objKey{objSandbox, id}, "")
	return resp, err
}

// viewError turns a view error into a gRPC status the kubelet understands.
func viewError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unavailable, err.Error())
}

// realSandbox translates an id minted in async mode to the runtime's
// (without waiting); other ids are returned as they are.
func (s *Shim) realSandbox(id string) string {
	if s.async == nil {
		return id
	}
	if real, ok := s.async.settledReal(id); ok {
		return real
	}
	return id
}

// awaitSandbox waits for an async sandbox and returns the runtime's id, or
// its creation error.
func (s *Shim) awaitSandbox(ctx context.Context, id string) (string, error) {
	if s.async == nil {
		return id, nil
	}
	real, _, err := s.async.await(ctx, id)
	return real, err
}

// lifecycleSandbox is awaitSandbox for Stop/Remove, which succeed on a
// sandbox whose creation failed.
func (s *Shim) lifecycleSandbox(ctx context.Context, id string) (real string, failed bool, err error) {
	if s.async == nil {
		return id, false, nil
	}
	real, failed, err = s.async.await(ctx, id)
	if failed {
		return "", true, nil
	}
	return real, false, err
}
