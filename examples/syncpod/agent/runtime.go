package agent

import (
	"context"
	"time"

	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runtimeLayer is the agent's one way to the runtime, in the place of the
// kubelet's kuberuntime: every RuntimeService and ImageManagerService
// call the agent makes is one of its methods, so that what the agent asks
// of the runtime, and with which filters, reads in one file. The library
// parts the agent composes (pleg, asyncpull) are given the services
// themselves through runtimeService and imageService, as the kubelet
// hands its runtime to its PLEG.
type runtimeLayer struct {
	rt  cri.RuntimeService
	img cri.ImageManagerService
}

func (r *runtimeLayer) runtimeService() cri.RuntimeService    { return r.rt }
func (r *runtimeLayer) imageService() cri.ImageManagerService { return r.img }

// version asks the runtime for its name and version.
func (r *runtimeLayer) version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	return r.rt.Version(ctx, "v1")
}

// status is the runtime's non-verbose Status: its conditions.
func (r *runtimeLayer) status(ctx context.Context) (*runtimeapi.StatusResponse, error) {
	return r.rt.Status(ctx, false)
}

// sandboxes lists the sandboxes whose labels hold every pair of sel (the
// pod's UID, or managedLabel for all the agent made).
func (r *runtimeLayer) sandboxes(ctx context.Context, sel map[string]string) ([]*runtimeapi.PodSandbox, error) {
	return r.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
}

// containers lists the containers whose labels hold every pair of sel.
func (r *runtimeLayer) containers(ctx context.Context, sel map[string]string) ([]*runtimeapi.Container, error) {
	return r.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
}

// sandboxContainers lists the containers of one sandbox; a non-nil state
// keeps only those in it.
func (r *runtimeLayer) sandboxContainers(ctx context.Context, sandboxID string, state *runtimeapi.ContainerStateValue) ([]*runtimeapi.Container, error) {
	return r.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sandboxID, State: state})
}

func (r *runtimeLayer) containerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatusResponse, error) {
	return r.rt.ContainerStatus(ctx, id, false)
}

func (r *runtimeLayer) runPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	return r.rt.RunPodSandbox(ctx, cfg, handler)
}

func (r *runtimeLayer) stopPodSandbox(ctx context.Context, id string) error {
	return r.rt.StopPodSandbox(ctx, id)
}

func (r *runtimeLayer) removePodSandbox(ctx context.Context, id string) error {
	return r.rt.RemovePodSandbox(ctx, id)
}

func (r *runtimeLayer) createContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	return r.rt.CreateContainer(ctx, sandboxID, cfg, sb)
}

func (r *runtimeLayer) startContainer(ctx context.Context, id string) error {
	return r.rt.StartContainer(ctx, id)
}

// stopContainer stops id, giving it timeout seconds (0: at once).
func (r *runtimeLayer) stopContainer(ctx context.Context, id string, timeout int64) error {
	return r.rt.StopContainer(ctx, id, timeout)
}

func (r *runtimeLayer) removeContainer(ctx context.Context, id string) error {
	return r.rt.RemoveContainer(ctx, id)
}

// execSync runs cmd in container id (probes and hooks); timeout 0 waits
// for it to end.
func (r *runtimeLayer) execSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error) {
	return r.rt.ExecSync(ctx, id, cmd, timeout)
}

// imageStatus reports whether image is on the node (a nil Image: it is not).
func (r *runtimeLayer) imageStatus(ctx context.Context, spec *runtimeapi.ImageSpec) (*runtimeapi.ImageStatusResponse, error) {
	return r.img.ImageStatus(ctx, spec, false)
}

func (r *runtimeLayer) pullImage(ctx context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	return r.img.PullImage(ctx, spec, auth, sb)
}
