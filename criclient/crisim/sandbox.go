package crisim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/syncpod/syncpod/internal/crifilter"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

type sandbox struct {
	id         string
	name       string // reserved name
	config     *runtimeapi.PodSandboxConfig
	handler    string
	state      runtimeapi.PodSandboxState
	createdAt  int64
	ip         string
	containers []string // ids, in creation order
}

func sandboxName(m *runtimeapi.PodSandboxMetadata) string {
	return fmt.Sprintf("%s_%s_%s_%d", m.Name, m.Namespace, m.Uid, m.Attempt)
}

func (s *sandbox) status() *runtimeapi.PodSandboxStatus {
	cfg := s.config
	st := &runtimeapi.PodSandboxStatus{
		Id:             s.id,
		Metadata:       proto.Clone(cfg.Metadata).(*runtimeapi.PodSandboxMetadata),
		State:          s.state,
		CreatedAt:      s.createdAt,
		Network:        &runtimeapi.PodSandboxNetworkStatus{Ip: s.ip},
		Labels:         maps.Clone(cfg.Labels),
		Annotations:    maps.Clone(cfg.Annotations),
		RuntimeHandler: s.handler,
	}
	if ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns != nil {
		st.Linux = &runtimeapi.LinuxPodSandboxStatus{
			Namespaces: &runtimeapi.Namespace{Options: proto.Clone(ns).(*runtimeapi.NamespaceOption)},
		}
	}
	return st
}

func (s *sandbox) summary() *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{
		Id:             s.id,
		Metadata:       proto.Clone(s.config.Metadata).(*runtimeapi.PodSandboxMetadata),
		State:          s.state,
		CreatedAt:      s.createdAt,
		Labels:         maps.Clone(s.config.Labels),
		Annotations:    maps.Clone(s.config.Annotations),
		RuntimeHandler: s.handler,
	}
}

// sandboxEventLocked publishes an event about sandbox s (container_id is the
// sandbox id, as in containerd 2.x).
func (r *Runtime) sandboxEventLocked(s *sandbox, t runtimeapi.ContainerEventType, at time.Time) {
	r.publishLocked(&runtimeapi.ContainerEventResponse{
		ContainerId:        s.id,
		ContainerEventType: t,
		CreatedAt:          at.UnixNano(),
		PodSandboxStatus:   s.status(),
		ContainersStatuses: r.podContainerStatusesLocked(s),
	})
}

func (r *Runtime) podContainerStatusesLocked(s *sandbox) []*runtimeapi.ContainerStatus {
	out := make([]*runtimeapi.ContainerStatus, 0, len(s.containers))
	for _, id := range s.containers {
		if c := r.containers[id]; c != nil {
			out = append(out, c.status())
		}
	}
	return out
}

// RunPodSandbox creates a READY sandbox and publishes CREATED and STARTED
// events for it. A name (metadata name, namespace, uid, attempt) already in
// use gives codes.AlreadyExists.
func (r *Runtime) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	const method = "RunPodSandbox"
	return serve(ctx, r, method, kindMutation, func() (*runtimeapi.RunPodSandboxResponse, error) {
		cfg := req.GetConfig()
		if cfg == nil {
			return nil, errInvalid(method, "config is nil")
		}
		m := cfg.GetMetadata()
		if m == nil || m.Name == "" || m.Uid == "" || m.Namespace == "" {
			return nil, errInvalid(method, "metadata name, namespace and uid are required")
		}
		id := r.newID()
		now := r.clock.Now()
		name := sandboxName(m)

		r.mu.Lock()
		defer r.mu.Unlock()
		if other, ok := r.names[name]; ok {
			return nil, errExists(method, "sandbox name %q is reserved for %q", name, other)
		}
		r.ipSeq++
		s := &sandbox{
			id:        id,
			name:      name,
			config:    proto.Clone(cfg).(*runtimeapi.PodSandboxConfig),
			handler:   req.GetRuntimeHandler(),
			state:     runtimeapi.PodSandboxState_SANDBOX_READY,
			createdAt: now.UnixNano(),
			ip:        fmt.Sprintf("10.88.%d.%d", (r.ipSeq>>8)&0xff, r.ipSeq&0xff),
		}
		r.sandboxes[id] = s
		r.names[name] = id
		r.sandboxEventLocked(s, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, now)
		r.sandboxEventLocked(s, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, now)
		return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
	})
}

// StopPodSandbox stops the sandbox's running containers (STOPPED event each)
// and makes it NOTREADY (STOPPED event). Stopping a stopped sandbox is a
// no-op; an unknown id gives codes.NotFound.
func (r *Runtime) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	const method = "StopPodSandbox"
	return serve(ctx, r, method, kindMutation, func() (*runtimeapi.StopPodSandboxResponse, error) {
		id := req.GetPodSandboxId()
		if id == "" {
			return nil, errInvalid(method, "pod_sandbox_id is empty")
		}
		now := r.clock.Now()
		r.mu.Lock()
		s := r.sandboxes[id]
		if s == nil {
			r.mu.Unlock()
			return nil, errNotFound(method, "pod sandbox %q", id)
		}
		timers := r.stopSandboxLocked(s, now)
		r.mu.Unlock()
		stopTimers(timers)
		return &runtimeapi.StopPodSandboxResponse{}, nil
	})
}

// stopSandboxLocked stops s and its running containers and returns the exit
// timers to stop once r.mu is released.
func (r *Runtime) stopSandboxLocked(s *sandbox, now time.Time) []clock.Timer {
	var timers []clock.Timer
	for _, cid := range s.containers {
		if c := r.containers[cid]; c != nil && c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			if t := r.exitLocked(c, c.stopCode, now); t != nil {
				timers = append(timers, t)
			}
		}
	}
	if s.state == runtimeapi.PodSandboxState_SANDBOX_READY {
		s.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		r.sandboxEventLocked(s, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, now)
	}
	return timers
}

// RemovePodSandbox stops the sandbox if needed, removes its containers
// (DELETED event each) and then the sandbox (DELETED event carrying its last,
// NOTREADY status). Removing an unknown sandbox succeeds, as the CRI requires.
func (r *Runtime) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	const method = "RemovePodSandbox"
	return serve(ctx, r, method, kindMutation, func() (*runtimeapi.RemovePodSandboxResponse, error) {
		id := req.GetPodSandboxId()
		if id == "" {
			return nil, errInvalid(method, "pod_sandbox_id is empty")
		}
		now := r.clock.Now()
		r.mu.Lock()
		s := r.sandboxes[id]
		if s == nil {
			r.mu.Unlock()
			return &runtimeapi.RemovePodSandboxResponse{}, nil
		}
		timers := r.stopSandboxLocked(s, now)
		for _, cid := range slices.Clone(s.containers) {
			if c := r.containers[cid]; c != nil {
				if t := r.removeContainerLocked(c, now); t != nil {
					timers = append(timers, t)
				}
			}
		}
		delete(r.sandboxes, id)
		delete(r.names, s.name)
		r.sandboxEventLocked(s, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, now)
		r.mu.Unlock()
		stopTimers(timers)
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	})
}

// PodSandboxStatus returns the sandbox's status; an unknown id gives
// codes.NotFound.
func (r *Runtime) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	const method = "PodSandboxStatus"
	return serve(ctx, r, method, kindRead, func() (*runtimeapi.PodSandboxStatusResponse, error) {
		id := req.GetPodSandboxId()
		if id == "" {
			return nil, errInvalid(method, "pod_sandbox_id is empty")
		}
		now := r.clock.Now() // before r.mu: see Runtime.mu
		r.mu.RLock()
		defer r.mu.RUnlock()
		s := r.sandboxes[id]
		if s == nil {
			return nil, errNotFound(method, "pod sandbox %q", id)
		}
		resp := &runtimeapi.PodSandboxStatusResponse{Status: s.status()}
		if req.GetVerbose() {
			resp.ContainersStatuses = r.podContainerStatusesLocked(s)
			resp.Timestamp = now.UnixNano()
		}
		return resp, nil
	})
}

// ListPodSandbox lists sandboxes matching the filter (id or unique id
// prefix, state, labels), oldest first.
func (r *Runtime) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	const method = "ListPodSandbox"
	return serve(ctx, r, method, kindList, func() (*runtimeapi.ListPodSandboxResponse, error) {
		f := req.GetFilter()
		r.mu.RLock()
		defer r.mu.RUnlock()
		id := resolveID(f.GetId(), r.sandboxes)
		out := []*runtimeapi.PodSandbox{}
		for _, s := range r.sandboxes {
			if crifilter.MatchSandbox(f, id, crifilter.Sandbox{ID: s.id, State: s.state, Labels: s.config.Labels}) {
				out = append(out, s.summary())
			}
		}
		slices.SortFunc(out, func(a, b *runtimeapi.PodSandbox) int {
			return cmpCreated(a.CreatedAt, b.CreatedAt, a.Id, b.Id)
		})
		return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
	})
}
