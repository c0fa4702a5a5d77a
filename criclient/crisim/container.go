package crisim

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/syncpod/syncpod/internal/crifilter"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Annotations on a ContainerConfig that script the simulated process.
const (
	// AnnotationExitAfter (a Go duration, e.g. "2s") makes a started
	// container exit on its own that long after StartContainer, measured on
	// the runtime clock. "0s" exits right after starting.
	AnnotationExitAfter = "crisim.syncpod.io/exit-after"
	// AnnotationExitCode (an int32, default 0) is the code of that exit.
	AnnotationExitCode = "crisim.syncpod.io/exit-code"
	// AnnotationStopExitCode (an int32) is the exit code when the container
	// is stopped by StopContainer, StopPodSandbox or RemoveContainer
	// (default: WithStopExitCode, 0).
	AnnotationStopExitCode = "crisim.syncpod.io/stop-exit-code"
	// AnnotationStartError makes StartContainer fail with codes.Unknown and
	// this message, as a runc failure does ("exec: not found"); the
	// container is then EXITED with exit code 128 and reason "StartError",
	// like containerd's, and a STOPPED event is published.
	AnnotationStartError = "crisim.syncpod.io/start-error"
)

// Exit code and reason of a container that failed to start (containerd's).
const (
	startErrorExitCode = 128
	startErrorReason   = "StartError"
)

type container struct {
	id         string
	sandboxID  string
	name       string // reserved name
	config     *runtimeapi.ContainerConfig
	imageID    string
	imageRef   string // repo digest
	logPath    string
	state      runtimeapi.ContainerState
	createdAt  int64
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string
	message    string
	startError string // AnnotationStartError

	exitAfter    time.Duration
	hasExitAfter bool
	scriptedCode int32
	stopCode     int32
	startGen     uint64      // identifies one start, for the scripted-exit timer
	exitTimer    clock.Timer // pending scripted exit, if any
}

func containerName(m *runtimeapi.ContainerMetadata, sb *sandbox) string {
	return fmt.Sprintf("%s_%d_%s", m.Name, m.Attempt, sb.name)
}

func (c *container) status() *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    proto.Clone(c.config.Metadata).(*runtimeapi.ContainerMetadata),
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       proto.Clone(c.config.Image).(*runtimeapi.ImageSpec),
		ImageRef:    c.imageRef,
		ImageId:     c.imageID,
		Reason:      c.reason,
		Message:     c.message,
		Labels:      maps.Clone(c.config.Labels),
		Annotations: maps.Clone(c.config.Annotations),
		LogPath:     c.logPath,
	}
}

func (c *container) summary() *runtimeapi.Container {
	return &runtimeapi.Container{
		Id:           c.id,
		PodSandboxId: c.sandboxID,
		Metadata:     proto.Clone(c.config.Metadata).(*runtimeapi.ContainerMetadata),
		Image:        proto.Clone(c.config.Image).(*runtimeapi.ImageSpec),
		ImageRef:     c.imageID,
		ImageId:      c.imageID,
		State:        c.state,
		CreatedAt:    c.createdAt,
		Labels:       maps.Clone(c.config.Labels),
		Annotations:  maps.Clone(c.config.Annotations),
	}
}

func (r *Runtime) containerEventLocked(c *container, t runtimeapi.ContainerEventType, at time.Time) {
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        c.id,
		ContainerEventType: t,
		CreatedAt:          at.UnixNano(),
	}
	if s := r.sandboxes[c.sandboxID]; s != nil {
		ev.PodSandboxStatus = s.status()
		ev.ContainersStatuses = r.podContainerStatusesLocked(s)
	}
	r.publishLocked(ev)
}

// parseScript reads the crisim annotations of a container config.
func (r *Runtime) parseScript(method string, c *container) error {
	ann := c.config.GetAnnotations()
	c.stopCode = r.cfg.stopExitCode
	c.startError = ann[AnnotationStartError]
	if v, ok := ann[AnnotationExitAfter]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return errInvalid(method, "annotation %s=%q: want a non-negative Go duration", AnnotationExitAfter, v)
		}
		c.exitAfter, c.hasExitAfter = d, true
	}
	for key, dst := range map[string]*int32{AnnotationExitCode: &c.scriptedCode, AnnotationStopExitCode: &c.stopCode} {
		if v, ok := ann[key]; ok {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return errInvalid(method, "annotation %s=%q: want an int32", key, v)
			}
			*dst = int32(n)
		}
	}
	return nil
}

// exitLocked moves a running container to EXITED with code at time at and
// publishes STOPPED. It returns the pending scripted-exit timer, which the
// caller stops after releasing r.mu.
func (r *Runtime) exitLocked(c *container, code int32, at time.Time) clock.Timer {
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.finishedAt = at.UnixNano()
	c.exitCode = code
	c.reason = "Completed"
	if code != 0 {
		c.reason = "Error"
	}
	t := c.exitTimer
	c.exitTimer = nil
	c.startGen = 0
	r.containerEventLocked(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, at)
	return t
}

// removeContainerLocked deletes c (stopping it first if running; that
// timer is not returned because the scripted exit checks the container still
// exists) and publishes DELETED.
func (r *Runtime) removeContainerLocked(c *container, now time.Time) clock.Timer {
	var t clock.Timer
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		t = r.exitLocked(c, c.stopCode, now)
	}
	delete(r.containers, c.id)
	delete(r.names, c.name)
	if s := r.sandboxes[c.sandboxID]; s != nil {
		s.containers = slices.DeleteFunc(s.containers, func(id string) bool { return id == c.id })
	}
	r.containerEventLocked(c, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, now)
	return t
}

// CreateContainer creates a container in a READY sandbox from an image that
// is present, and publishes CREATED. The crisim annotations script its run
// (AnnotationExitAfter, AnnotationExitCode, AnnotationStopExitCode).
func (r *Runtime) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	const method = "CreateContainer"
	return serve(ctx, r, method, kindMutation, func() (*runtimeapi.CreateContainerResponse, error) {
		cfg := req.GetConfig()
		switch {
		case req.GetPodSandboxId() == "":
			return nil, errInvalid(method, "pod_sandbox_id is empty")
		case cfg == nil:
			return nil, errInvalid(method, "config is nil")
		case cfg.GetMetadata() == nil || cfg.GetMetadata().GetName() == "":
			return nil, errInvalid(method, "config metadata name is required")
		case cfg.GetImage().GetImage() == "":
			return nil, errInvalid(method, "config image is required")
		}
		c := &container{
			id:        r.newID(),
			sandboxID: req.GetPodSandboxId(),
			config:    proto.Clone(cfg).(*runtimeapi.ContainerConfig),
			state:     runtimeapi.ContainerState_CONTAINER_CREATED,
		}
		if err := r.parseScript(method, c); err != nil {
			return nil, err
		}
		now := r.clock.Now()
		c.createdAt = now.UnixNano()

		r.mu.Lock()
		defer r.mu.Unlock()
		s := r.sandboxes[c.sandboxID]
		if s == nil {
			return nil, errNotFound(method, "pod sandbox %q", c.sandboxID)
		}
		if s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
			return nil, errPrecondition(method, "pod sandbox %q is not ready", s.id)
		}
		img := r.images.lookupLocked(cfg.GetImage().GetImage())
		if img == nil {
			return nil, errNotFound(method, "image %q is not present: pull it first (or give it to crisim.WithImage)", cfg.GetImage().GetImage())
		}
		c.name = containerName(cfg.Metadata, s)
		if other, ok := r.names[c.name]; ok {
			return nil, errExists(method, "container name %q is reserved for %q", c.name, other)
		}
		c.imageID, c.imageRef = img.id, img.repoDigest()
		if dir := s.config.GetLogDirectory(); dir != "" && cfg.GetLogPath() != "" {
			c.logPath = filepath.Join(dir, cfg.GetLogPath())
		}
		r.containers[c.id] = c
		r.names[c.name] = c.id
		s.containers = append(s.containers, c.id)
		r.containerEventLocked(c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, now)
		return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
	})
}

// StartContainer moves a CREATED container to RUNNING and publishes STARTED;
// if it has AnnotationExitAfter it then exits on its own. Starting a
// container in any other state gives codes.FailedPrecondition.
func (r *Runtime) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	const method = "StartContainer"
	return serve(ctx, r, method, kindMutation, func() (*runtimeapi.StartContainerResponse, error) {
		id := req.GetContainerId()
		if id == "" {
			return nil, errInvalid(method, "container_id is empty")
		}
		now := r.clock.Now()
		r.mu.Lock()
		c := r.containers[id]
		if c == nil {
			r.mu.Unlock()
			return nil, errNotFound(method, "container %q", id)
		}
		if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
			st := c.state
			r.mu.Unlock()
			return nil, errPrecondition(method, "container %q is in state %s, not CREATED", id, st)
		}
		if s := r.sandboxes[c.sandboxID]; s == nil || s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
			r.mu.Unlock()
			return nil, errPrecondition(method, "pod sandbox %q of container %q is not ready", c.sandboxID, id)
		}
		if c.startError != "" {
			c.state = runtimeapi.ContainerState_CONTAINER_EXITED
			c.finishedAt = now.UnixNano()
			c.exitCode = startErrorExitCode
			c.reason, c.message = startErrorReason, c.startError
			r.containerEventLocked(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, now)
			r.mu.Unlock()
			return nil, newError(method, ErrInjected, codes.Unknown, "failed to start containerd task %q: %s", id, c.startError)
		}
		c.state = runtimeapi.ContainerState_CONTAINER_RUNNING
		c.startedAt = now.UnixNano()
		r.containerEventLocked(c, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, now)
		if !c.hasExitAfter {
			r.mu.Unlock()
			return &runtimeapi.StartContainerResponse{}, nil
		}
		if c.exitAfter == 0 {
			r.exitLocked(c, c.scriptedCode, now)
			r.mu.Unlock()
			return &runtimeapi.StartContainerResponse{}, nil
		}
		r.startSeq++
		gen := r.startSeq
		c.startGen = gen
		d, code, at := c.exitAfter, c.scriptedCode, now.Add(c.exitAfter)
		r.mu.Unlock()

		// Schedule outside r.mu: a fake clock runs callbacks under its own lock.
		t := r.clock.AfterFunc(d, func() { r.scriptedExit(id, gen, code, at) })
		r.mu.Lock()
		keep := c.startGen == gen && r.containers[id] == c && !r.closed()
		if keep {
			c.exitTimer = t
		}
		r.mu.Unlock()
		if !keep {
			t.Stop()
		}
		return &runtimeapi.StartContainerResponse{}, nil
	})
}

// scriptedExit runs on the clock's timer; it must not call the clock.
func (r *Runtime) scriptedExit(id string, gen uint64, code int32, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	if c == nil || c.startGen != gen || c.state != runtimeapi.ContainerState_CONTAINER_RUNNING || r.closed() {
		return
	}
	c.exitTimer = nil
	r.exitLocked(c, code, at)
}

// ExitContainer makes a running container exit now with code, as if its
// process ended, publishing STOPPED. It returns an error wrapping
// ErrNotFound or ErrFailedPrecondition (not running), or an *ArgError on a
// Runtime that New did not make.
func (r *Runtime) ExitContainer(id string, code int32) error {
	const method = "ExitContainer"
	if !r.ready() {
		return errNotNew(method)
	}
	now := r.clock.Now()
	r.mu.Lock()
	c := r.containers[id]
	if c == nil {
		r.mu.Unlock()
		return errNotFound(method, "container %q", id)
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		st := c.state
		r.mu.Unlock()
		return errPrecondition(method, "container %q is in state %s, not RUNNING", id, st)
	}
	t := r.exitLocked(c, code, now)
	r.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	return nil
}

// StopContainer stops a running container (exit code from
// AnnotationStopExitCode or WithStopExitCode) and publishes STOPPED. A
// container that is not running is left as is, as containerd does; an unknown
// id gives codes.NotFound.
func (r *Runtime) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	const method = "StopContainer"
	return serve(ctx, r, method, kindMutation, func() (*runtimeapi.StopContainerResponse, error) {
		id := req.GetContainerId()
		if id == "" {
			return nil, errInvalid(method, "container_id is empty")
		}
		now := r.clock.Now()
		r.mu.Lock()
		c := r.containers[id]
		if c == nil {
			r.mu.Unlock()
			return nil, errNotFound(method, "container %q", id)
		}
		var t clock.Timer
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t = r.exitLocked(c, c.stopCode, now)
		}
		r.mu.Unlock()
		if t != nil {
			t.Stop()
		}
		return &runtimeapi.StopContainerResponse{}, nil
	})
}

// RemoveContainer removes a container, stopping it first if it runs
// (STOPPED, then DELETED). Removing an unknown container succeeds, as the CRI
// requires.
func (r *Runtime) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	const method = "RemoveContainer"
	return serve(ctx, r, method, kindMutation, func() (*runtimeapi.RemoveContainerResponse, error) {
		id := req.GetContainerId()
		if id == "" {
			return nil, errInvalid(method, "container_id is empty")
		}
		now := r.clock.Now()
		r.mu.Lock()
		var t clock.Timer
		if c := r.containers[id]; c != nil {
			t = r.removeContainerLocked(c, now)
		}
		r.mu.Unlock()
		if t != nil {
			t.Stop()
		}
		return &runtimeapi.RemoveContainerResponse{}, nil
	})
}

// ContainerStatus returns a container's status; an unknown id gives
// codes.NotFound.
func (r *Runtime) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	const method = "ContainerStatus"
	return serve(ctx, r, method, kindRead, func() (*runtimeapi.ContainerStatusResponse, error) {
		id := req.GetContainerId()
		if id == "" {
			return nil, errInvalid(method, "container_id is empty")
		}
		r.mu.RLock()
		defer r.mu.RUnlock()
		c := r.containers[id]
		if c == nil {
			return nil, errNotFound(method, "container %q", id)
		}
		return &runtimeapi.ContainerStatusResponse{Status: c.status()}, nil
	})
}

// ListContainers lists containers matching the filter (id or unique id
// prefix, state, sandbox id or unique prefix, labels), oldest first.
func (r *Runtime) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	const method = "ListContainers"
	return serve(ctx, r, method, kindList, func() (*runtimeapi.ListContainersResponse, error) {
		f := req.GetFilter()
		r.mu.RLock()
		defer r.mu.RUnlock()
		id := resolveID(f.GetId(), r.containers)
		sid := resolveID(f.GetPodSandboxId(), r.sandboxes)
		out := []*runtimeapi.Container{}
		for _, c := range r.containers {
			if crifilter.MatchContainer(f, id, sid, crifilter.Container{ID: c.id, PodSandboxID: c.sandboxID, State: c.state, Labels: c.config.Labels}) {
				out = append(out, c.summary())
			}
		}
		slices.SortFunc(out, func(a, b *runtimeapi.Container) int {
			return cmpCreated(a.CreatedAt, b.CreatedAt, a.Id, b.Id)
		})
		return &runtimeapi.ListContainersResponse{Containers: out}, nil
	})
}
