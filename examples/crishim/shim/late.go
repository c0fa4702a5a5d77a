package shim

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// lateGrace is how long past its caller's deadline a CreateContainer or a
// synchronous RunPodSandbox already sent to the runtime is still awaited,
// so that a container the runtime creates after its caller gave up is seen
// and removed, and a sandbox it creates then is kept for the caller's
// retry.
const lateGrace = 2 * time.Minute

// undoTimeout bounds the RemoveContainer that undoes such a container.
const undoTimeout = time.Minute

// sandboxWaitReserve is the part of its caller's deadline that a call
// waiting for a sandbox still being created (async mode) leaves for the
// call itself: at most this, at most a quarter of the time left.
const sandboxWaitReserve = 30 * time.Second

// abandonedKey names a container by what the runtime makes unique: its
// sandbox and its metadata name and attempt.
type abandonedKey struct {
	sandbox, name string
	attempt       uint32
}

// abandoned tracks the CreateContainer calls whose caller gave up while
// the runtime had the call: the container they may create is hidden from
// the shim's answers until the call ends and the container is removed.
type abandoned struct {
	mu   sync.Mutex
	keys map[abandonedKey]int
}

func (a *abandoned) add(k abandonedKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.keys == nil {
		a.keys = map[abandonedKey]int{}
	}
	a.keys[k]++
}

func (a *abandoned) done(k abandonedKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.keys[k]--; a.keys[k] <= 0 {
		delete(a.keys, k)
	}
}

// hidden says whether a container of sandboxID with metadata md belongs to
// an abandoned call.
func (a *abandoned) hidden(sandboxID string, md *runtimeapi.ContainerMetadata) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.keys) == 0 {
		return false
	}
	return a.keys[abandonedKey{sandboxID, md.GetName(), md.GetAttempt()}] > 0
}

// count is how many calls are abandoned.
func (a *abandoned) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.keys {
		n += c
	}
	return n
}

// any says whether a call is abandoned at all (the common case: none).
func (a *abandoned) any() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.keys) > 0
}

// filterContainers drops the containers of abandoned calls.
func (a *abandoned) filterContainers(items []*runtimeapi.Container) []*runtimeapi.Container {
	if !a.any() {
		return items
	}
	out := items[:0:0]
	for _, c := range items {
		if !a.hidden(c.GetPodSandboxId(), c.GetMetadata()) {
			out = append(out, c)
		}
	}
	return out
}

// filterEvent drops an event about a container of an abandoned call (nil)
// and that container's status from the other events of its pod. The event
// is shared, so it is copied before it is changed.
func (a *abandoned) filterEvent(ev *runtimeapi.ContainerEventResponse) *runtimeapi.ContainerEventResponse {
	if !a.any() {
		return ev
	}
	sandboxID := ev.GetPodSandboxStatus().GetId()
	var keep []*runtimeapi.ContainerStatus
	dropped := false
	for _, cs := range ev.GetContainersStatuses() {
		if a.hidden(sandboxID, cs.GetMetadata()) {
			if cs.GetId() == ev.GetContainerId() {
				return nil
			}
			dropped = true
			continue
		}
		keep = append(keep, cs)
	}
	if !dropped {
		return ev
	}
	ev = proto.Clone(ev).(*runtimeapi.ContainerEventResponse)
	ev.ContainersStatuses = keep
	return ev
}

// callerGone is the error a caller whose context ended is answered with.
func callerGone(ctx context.Context) error {
	return status.FromContextError(ctx.Err()).Err()
}

// sendDetached sends a mutation that must not be lost half-way. It is not
// sent when its caller's context ends before it is admitted. Once sent,
// the runtime's answer is awaited even after the caller gave up, up to
// lateGrace past the caller's deadline, so that the shim learns what the
// runtime did: containerd goes on with a call its client abandoned.
func sendDetached[Req, Resp any](s *Shim, ctx context.Context, method string, req Req, fn func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	var zero Resp
	if s.draining() {
		return zero, status.Error(codes.Unavailable, ErrDraining.Error())
	}
	release, err := s.admit(ctx, method)
	if err != nil {
		return zero, err
	}
	defer release()
	cctx, cancel := detached(ctx)
	defer cancel()
	start := time.Now()
	resp, err := fn(cctx, req)
	s.logCall(method, start, err)
	return resp, err
}

// detached is ctx without its cancellation, for a call to the runtime
// that must outlive its caller: containerd goes on with a call its client
// abandoned, so the shim waits for the answer to learn what it did. The
// call is bounded by lateGrace past the caller's deadline, or by
// asyncRunTimeout (the kubelet's RunPodSandbox timeout, its longest) when
// the caller set none.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(context.WithoutCancel(ctx), d.Add(lateGrace))
	}
	return context.WithTimeout(context.WithoutCancel(ctx), asyncRunTimeout)
}

// createContainer sends CreateContainer for the runtime's sandbox id and
// undoes a container the runtime created after the caller gave up: the
// caller was told the call failed (DEADLINE_EXCEEDED or CANCELED) and
// creates it again, so keeping the first one would leave the pod with
// two.
func (s *Shim) createContainer(ctx context.Context, id string, r *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	if ctx.Err() != nil { // gave up while the sandbox was awaited
		return nil, callerGone(ctx)
	}
	key := abandonedKey{id, r.GetConfig().GetMetadata().GetName(), r.GetConfig().GetMetadata().GetAttempt()}
	// From the moment the caller gives up until the call has ended and
	// its container is removed, the container is hidden.
	var mu sync.Mutex
	gone, ended := false, false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			gone = true
			s.abandoned.add(key)
		}
	})
	defer func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		ended = true
		if gone {
			s.abandoned.done(key)
		}
	}()
	resp, err := sendDetached(s, ctx, "CreateContainer", r, s.rt.CreateContainer)
	if ctx.Err() == nil {
		if err == nil {
			s.statuses.wrote(objKey{objContainer, resp.GetContainerId()}, id, containerRank(runtimeapi.ContainerState_CONTAINER_CREATED), nil)
		}
		return resp, err
	}
	switch {
	case err == nil && resp.GetContainerId() != "":
		s.undoCreate(id, resp.GetContainerId())
	case err != nil && status.Code(err) == codes.DeadlineExceeded:
		// Not answered within lateGrace either: what the runtime did is
		// unknown. Its container, if any, is the kubelet's to collect.
		s.log.Warn("CreateContainer abandoned by its caller and not answered in time; a container it creates is left to the kubelet",
			zap.String("podSandboxId", id), zap.String("container", key.name), zap.Uint32("attempt", key.attempt))
	}
	return nil, callerGone(ctx)
}

// undoCreate removes container cid, which the runtime created after its
// caller gave up.
func (s *Shim) undoCreate(sandboxID, cid string) {
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	_, err := admitAndCall(s, ctx, "RemoveContainer", &runtimeapi.RemoveContainerRequest{ContainerId: cid}, s.rt.RemoveContainer)
	if err != nil {
		s.log.Warn("could not remove a container created after its caller gave up", zap.String("containerId", cid), zap.Error(err))
		s.statuses.changedUnseen(objKey{objContainer, cid}, sandboxID)
		return
	}
	s.lateUndone.Add(1)
	s.log.Info("removed a container created after its caller gave up", zap.String("containerId", cid), zap.String("podSandboxId", sandboxID))
	s.view.ContainerRemoved(cid)
	s.statuses.removed(objKey{objContainer, cid})
}
