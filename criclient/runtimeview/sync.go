package runtimeview

import (
	"context"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxConfirms bounds the status calls in flight that confirm mutations.
const maxConfirms = 16

func (v *View) relistLoop() {
	defer v.wg.Done()
	t := v.cfg.clock.NewTicker(v.cfg.relistPeriod)
	defer t.Stop()
	for {
		v.relistOnce()
		select {
		case <-v.life.Done():
			return
		case <-t.C():
		case <-v.relist:
		}
	}
}

// relistOnce lists everything and merges it: an object the runtime listed
// replaces what the view holds unless the view saw it later (an event or a
// confirmation after the relist started); an object it did not list is
// dropped unless the view saw it after the relist started.
func (v *View) relistOnce() {
	startedAt := v.cfg.clock.Now()
	v.mu.Lock()
	started := v.nextLocked()
	v.mu.Unlock()
	ctx, cancel := context.WithTimeout(v.life, v.cfg.maxStaleness)
	sandboxes, err := v.src.ListPodSandbox(ctx, nil)
	var containers []*runtimeapi.Container
	if err == nil {
		containers, err = v.src.ListContainers(ctx, nil)
	}
	cancel()

	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed || v.life.Err() != nil {
		return
	}
	v.stats.Relists++
	if err != nil {
		v.stats.RelistErrors++
		v.lastErr = err
		v.log.Debug("relist failed", zap.Error(err))
		v.broadcastLocked()
		return
	}
	mergeList(v.sandboxes, sandboxes, kindSandbox, v.tombs, started, (*runtimeapi.PodSandbox).GetId)
	mergeList(v.containers, containers, kindContainer, v.tombs, started, (*runtimeapi.Container).GetId)
	for k, at := range v.tombs {
		if at <= started {
			delete(v.tombs, k)
		}
	}
	for k, at := range v.dirty {
		if at <= started {
			delete(v.dirty, k)
		}
	}
	if startedAt.After(v.syncedAt) {
		v.syncedAt = startedAt
	}
	v.lastErr = nil
	select {
	case <-v.synced:
	default:
		close(v.synced)
	}
	v.broadcastLocked()
}

func mergeList[T any](m map[string]entry[T], items []T, k kind, tombs map[key]tick, started tick, id func(T) string) {
	listed := make(map[string]struct{}, len(items))
	for _, it := range items {
		i := id(it)
		listed[i] = struct{}{}
		if e, ok := m[i]; ok && e.seen > started {
			continue
		}
		if at, ok := tombs[key{k, i}]; ok && at > started {
			continue
		}
		m[i] = entry[T]{item: it, seen: started}
	}
	for i, e := range m {
		if _, ok := listed[i]; !ok && e.seen <= started {
			delete(m, i)
		}
	}
}

// SandboxChanged reports that a mutation of sandbox id made by the caller
// has returned (RunPodSandbox, StopPodSandbox, UpdatePodSandboxResources).
// Every read that begins after SandboxChanged returns reflects it: the view
// confirms the sandbox and its containers with status calls in the
// background, and such reads wait for that (or for a relist that started
// later).
func (v *View) SandboxChanged(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed || id == "" {
		return
	}
	now := v.nextLocked()
	v.markLocked(key{kindSandbox, id}, now, "")
	for cid, e := range v.containers {
		if e.item.GetPodSandboxId() == id {
			v.markLocked(key{kindContainer, cid}, now, id)
		}
	}
}

// ContainerChanged reports that a mutation of container id in sandbox
// podSandboxID made by the caller has returned (CreateContainer,
// StartContainer, StopContainer, UpdateContainerResources).
// podSandboxID may be empty when the caller does not know it (the view's
// own record is used, or a relist confirms the change).
func (v *View) ContainerChanged(id, podSandboxID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed || id == "" {
		return
	}
	if podSandboxID == "" {
		podSandboxID = v.containers[id].item.GetPodSandboxId()
	}
	v.markLocked(key{kindContainer, id}, v.nextLocked(), podSandboxID)
}

// SandboxRemoved reports that RemovePodSandbox of id succeeded: the sandbox
// and its containers leave the view at once.
func (v *View) SandboxRemoved(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.removeSandboxLocked(id, v.nextLocked())
}

// ContainerRemoved reports that RemoveContainer of id succeeded: the
// container leaves the view at once.
func (v *View) ContainerRemoved(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.removeContainerLocked(id, v.nextLocked())
}

func (v *View) removeSandboxLocked(id string, now tick) {
	delete(v.sandboxes, id)
	v.tombs[key{kindSandbox, id}] = now
	delete(v.dirty, key{kindSandbox, id})
	for cid, e := range v.containers {
		if e.item.GetPodSandboxId() == id {
			v.removeContainerLocked(cid, now)
		}
	}
	v.broadcastLocked()
}

func (v *View) removeContainerLocked(id string, now tick) {
	delete(v.containers, id)
	v.tombs[key{kindContainer, id}] = now
	delete(v.dirty, key{kindContainer, id})
	v.broadcastLocked()
}

// markLocked records an unconfirmed mutation and starts its confirmation.
func (v *View) markLocked(k key, at tick, podSandboxID string) {
	v.dirty[k] = at
	if k.kind == kindContainer && podSandboxID == "" {
		// A container status does not name its sandbox: only a relist
		// can place it.
		v.requestRelist()
		return
	}
	v.wg.Add(1)
	go v.confirm(k, podSandboxID)
}

// confirm reads one object's status and applies it.
func (v *View) confirm(k key, podSandboxID string) {
	defer v.wg.Done()
	select {
	case v.confirmSlots <- struct{}{}:
		defer func() { <-v.confirmSlots }()
	case <-v.life.Done():
		return
	}
	ctx, cancel := context.WithTimeout(v.life, min(v.cfg.statusTimeout, v.cfg.maxStaleness))
	defer cancel()
	v.mu.Lock()
	started := v.nextLocked()
	v.mu.Unlock()
	var (
		sandbox   *runtimeapi.PodSandboxStatus
		container *runtimeapi.ContainerStatus
		err       error
	)
	if k.kind == kindSandbox {
		var resp *runtimeapi.PodSandboxStatusResponse
		if resp, err = v.src.PodSandboxStatus(ctx, k.id, false); err == nil {
			sandbox = resp.GetStatus()
		}
	} else {
		var resp *runtimeapi.ContainerStatusResponse
		if resp, err = v.src.ContainerStatus(ctx, k.id, false); err == nil {
			container = resp.GetStatus()
		}
	}

	v.mu.Lock()
	defer v.mu.Unlock()
	v.stats.StatusCalls++
	if v.closed {
		return
	}
	switch {
	case status.Code(err) == codes.NotFound:
		if k.kind == kindSandbox {
			v.removeSandboxLocked(k.id, started)
		} else {
			v.removeContainerLocked(k.id, started)
		}
	case err != nil || (sandbox == nil && container == nil):
		// Leave the mark: a relist that starts later resolves it, and
		// until then reads wait (or time out) rather than miss the change.
		v.log.Debug("confirming a mutation failed", zap.String("id", k.id), zap.Error(err))
		v.requestRelist()
		return
	case v.tombs[k] > started:
	case sandbox != nil:
		if e, ok := v.sandboxes[k.id]; !ok || e.seen <= started {
			v.sandboxes[k.id] = entry[*runtimeapi.PodSandbox]{item: sandboxFromStatus(sandbox), seen: started}
		}
	default:
		if e, ok := v.containers[k.id]; !ok || e.seen <= started {
			v.containers[k.id] = entry[*runtimeapi.Container]{item: containerFromStatus(container, podSandboxID), seen: started}
		}
	}
	if at, ok := v.dirty[k]; ok && at <= started {
		delete(v.dirty, k)
	}
	v.broadcastLocked()
}
