package criclient

import (
	"context"
	"fmt"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

var none callExtra

// Version returns the runtime name, version and CRI API version.
func (c *Client) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	return invoke(c, ctx, "Version", none, func(ctx context.Context) (*runtimeapi.VersionResponse, error) {
		return c.runtime.Version(ctx, &runtimeapi.VersionRequest{Version: apiVersion})
	})
}

// Status returns the status of the runtime.
func (c *Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	return invoke(c, ctx, "Status", none, func(ctx context.Context) (*runtimeapi.StatusResponse, error) {
		resp, err := c.runtime.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
		if err == nil && resp.GetStatus() == nil {
			err = fmt.Errorf("%w: no status", ErrInvalidResponse)
		}
		return resp, err
	})
}

// RuntimeConfig returns the configuration information of the runtime.
func (c *Client) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	return invoke(c, ctx, "RuntimeConfig", none, func(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
		return c.runtime.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	})
}

// UpdateRuntimeConfig updates the runtime configuration.
func (c *Client) UpdateRuntimeConfig(ctx context.Context, runtimeConfig *runtimeapi.RuntimeConfig) error {
	return invoke0(c, ctx, "UpdateRuntimeConfig", none, func(ctx context.Context) error {
		_, err := c.runtime.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: runtimeConfig})
		return err
	})
}

// RunPodSandbox creates and starts a pod sandbox and returns its ID.
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	return invoke(c, ctx, "RunPodSandbox", none, func(ctx context.Context) (string, error) {
		resp, err := c.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
		if err == nil && resp.GetPodSandboxId() == "" {
			err = fmt.Errorf("%w: empty pod sandbox ID", ErrInvalidResponse)
		}
		return resp.GetPodSandboxId(), err
	})
}

// StopPodSandbox stops a pod sandbox and force-stops its containers.
func (c *Client) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	return invoke0(c, ctx, "StopPodSandbox", none, func(ctx context.Context) error {
		_, err := c.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podSandboxID})
		return err
	})
}

// RemovePodSandbox removes a pod sandbox and its containers.
func (c *Client) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	return invoke0(c, ctx, "RemovePodSandbox", none, func(ctx context.Context) error {
		_, err := c.runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podSandboxID})
		return err
	})
}

// PodSandboxStatus returns the status of a pod sandbox.
func (c *Client) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	return invoke(c, ctx, "PodSandboxStatus", none, func(ctx context.Context) (*runtimeapi.PodSandboxStatusResponse, error) {
		resp, err := c.runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podSandboxID, Verbose: verbose})
		if err == nil && resp.GetStatus() == nil {
			err = fmt.Errorf("%w: no status for pod sandbox %q", ErrInvalidResponse, podSandboxID)
		}
		return resp, err
	})
}

// ListPodSandbox lists pod sandboxes matching filter (nil: all). With
// WithListSnapshots it is answered from the shared snapshot.
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if err := c.check(ctx, "ListPodSandbox"); err != nil {
		return nil, err
	}
	if c.sandboxes != nil {
		items, err := c.sandboxes.get(ctx)
		if err != nil {
			return nil, err
		}
		return filterPodSandboxes(items, filter), nil
	}
	return invoke(c, ctx, "ListPodSandbox", none, func(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
		resp, err := c.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
		return resp.GetItems(), err
	})
}

// PortForward prepares a streaming endpoint to forward ports from a pod sandbox.
func (c *Client) PortForward(ctx context.Context, request *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return invoke(c, ctx, "PortForward", none, func(ctx context.Context) (*runtimeapi.PortForwardResponse, error) {
		return c.runtime.PortForward(ctx, request)
	})
}

// UpdatePodSandboxResources updates the pod-level resources of a sandbox.
func (c *Client) UpdatePodSandboxResources(ctx context.Context, request *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return invoke(c, ctx, "UpdatePodSandboxResources", none, func(ctx context.Context) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
		return c.runtime.UpdatePodSandboxResources(ctx, request)
	})
}

// CheckpointPod checkpoints a pod sandbox.
func (c *Client) CheckpointPod(ctx context.Context, options *runtimeapi.CheckpointPodRequest) error {
	return invoke0(c, ctx, "CheckpointPod", none, func(ctx context.Context) error {
		_, err := c.runtime.CheckpointPod(ctx, options)
		return err
	})
}

// RestorePod restores a pod sandbox from a checkpoint.
func (c *Client) RestorePod(ctx context.Context, options *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	return invoke(c, ctx, "RestorePod", none, func(ctx context.Context) (*runtimeapi.RestorePodResponse, error) {
		return c.runtime.RestorePod(ctx, options)
	})
}

// CreateContainer creates a container in a pod sandbox and returns its ID.
func (c *Client) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	return invoke(c, ctx, "CreateContainer", none, func(ctx context.Context) (string, error) {
		resp, err := c.runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
			PodSandboxId: podSandboxID, Config: config, SandboxConfig: sandboxConfig,
		})
		if err == nil && resp.GetContainerId() == "" {
			err = fmt.Errorf("%w: empty container ID", ErrInvalidResponse)
		}
		return resp.GetContainerId(), err
	})
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, containerID string) error {
	return invoke0(c, ctx, "StartContainer", none, func(ctx context.Context) error {
		_, err := c.runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: containerID})
		return err
	})
}

// StopContainer stops a running container, killing it after timeout seconds.
// The call's own deadline is extended by that grace period, as in the kubelet.
func (c *Client) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	x := callExtra{addTimeout: time.Duration(timeout) * time.Second}
	return invoke0(c, ctx, "StopContainer", x, func(ctx context.Context) error {
		_, err := c.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: timeout})
		return err
	})
}

// RemoveContainer removes a container.
func (c *Client) RemoveContainer(ctx context.Context, containerID string) error {
	return invoke0(c, ctx, "RemoveContainer", none, func(ctx context.Context) error {
		_, err := c.runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: containerID})
		return err
	})
}

// ListContainers lists containers matching filter (nil: all). With
// WithListSnapshots it is answered from the shared snapshot.
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if err := c.check(ctx, "ListContainers"); err != nil {
		return nil, err
	}
	if c.containers != nil {
		items, err := c.containers.get(ctx)
		if err != nil {
			return nil, err
		}
		if out, ok := filterContainers(items, filter); ok {
			return out, nil
		}
	}
	return invoke(c, ctx, "ListContainers", none, func(ctx context.Context) ([]*runtimeapi.Container, error) {
		resp, err := c.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
		return resp.GetContainers(), err
	})
}

// ContainerStatus returns the status of a container.
func (c *Client) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	return invoke(c, ctx, "ContainerStatus", none, func(ctx context.Context) (*runtimeapi.ContainerStatusResponse, error) {
		resp, err := c.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID, Verbose: verbose})
		if err == nil && resp.GetStatus() == nil {
			err = fmt.Errorf("%w: no status for container %q", ErrInvalidResponse, containerID)
		}
		return resp, err
	})
}

// UpdateContainerResources updates the resources of a container.
func (c *Client) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	return invoke0(c, ctx, "UpdateContainerResources", none, func(ctx context.Context) error {
		req := &runtimeapi.UpdateContainerResourcesRequest{ContainerId: containerID}
		if resources != nil {
			req.Linux = resources.Linux
			req.Windows = resources.Windows
		}
		_, err := c.runtime.UpdateContainerResources(ctx, req)
		return err
	})
}

// ExecSync runs a command in a container and returns its output. A non-zero
// exit code is returned as a k8s.io/utils/exec.CodeExitError, as the kubelet
// expects. With timeout 0 the call has no deadline; otherwise its deadline is
// timeout plus the ExecSync method timeout.
func (c *Client) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout []byte, stderr []byte, err error) {
	x := callExtra{addTimeout: timeout, noTimeout: timeout <= 0}
	resp, err := invoke(c, ctx, "ExecSync", x, func(ctx context.Context) (*runtimeapi.ExecSyncResponse, error) {
		return c.runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{
			ContainerId: containerID, Cmd: cmd, Timeout: int64(timeout.Seconds()),
		})
	})
	if err != nil {
		return nil, nil, err
	}
	if resp.GetExitCode() != 0 {
		return resp.GetStdout(), resp.GetStderr(), utilexec.CodeExitError{
			Err:  fmt.Errorf("criclient: ExecSync: command %q exited with %d: %s", strings.Join(cmd, " "), resp.GetExitCode(), resp.GetStderr()),
			Code: int(resp.GetExitCode()),
		}
	}
	return resp.GetStdout(), resp.GetStderr(), nil
}

// Exec prepares a streaming endpoint to execute a command in a container.
func (c *Client) Exec(ctx context.Context, request *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return invoke(c, ctx, "Exec", none, func(ctx context.Context) (*runtimeapi.ExecResponse, error) {
		return c.runtime.Exec(ctx, request)
	})
}

// Attach prepares a streaming endpoint to attach to a running container.
func (c *Client) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return invoke(c, ctx, "Attach", none, func(ctx context.Context) (*runtimeapi.AttachResponse, error) {
		return c.runtime.Attach(ctx, req)
	})
}

// ReopenContainerLog asks the runtime to reopen a container's log file.
func (c *Client) ReopenContainerLog(ctx context.Context, containerID string) error {
	return invoke0(c, ctx, "ReopenContainerLog", none, func(ctx context.Context) error {
		_, err := c.runtime.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: containerID})
		return err
	})
}

// CheckpointContainer checkpoints a container.
func (c *Client) CheckpointContainer(ctx context.Context, options *runtimeapi.CheckpointContainerRequest) error {
	return invoke0(c, ctx, "CheckpointContainer", none, func(ctx context.Context) error {
		_, err := c.runtime.CheckpointContainer(ctx, options)
		return err
	})
}

// ContainerStats returns the stats of a container.
func (c *Client) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	return invoke(c, ctx, "ContainerStats", none, func(ctx context.Context) (*runtimeapi.ContainerStats, error) {
		resp, err := c.runtime.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: containerID})
		return resp.GetStats(), err
	})
}

// ListContainerStats returns the stats of the containers matching filter.
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return invoke(c, ctx, "ListContainerStats", none, func(ctx context.Context) ([]*runtimeapi.ContainerStats, error) {
		resp, err := c.runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
		return resp.GetStats(), err
	})
}

// PodSandboxStats returns the stats of a pod sandbox.
func (c *Client) PodSandboxStats(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error) {
	return invoke(c, ctx, "PodSandboxStats", none, func(ctx context.Context) (*runtimeapi.PodSandboxStats, error) {
		resp, err := c.runtime.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: podSandboxID})
		return resp.GetStats(), err
	})
}

// ListPodSandboxStats returns the stats of the pod sandboxes matching filter.
func (c *Client) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return invoke(c, ctx, "ListPodSandboxStats", none, func(ctx context.Context) ([]*runtimeapi.PodSandboxStats, error) {
		resp, err := c.runtime.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
		return resp.GetStats(), err
	})
}

// ListMetricDescriptors returns the descriptors of the pod sandbox metrics.
func (c *Client) ListMetricDescriptors(ctx context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	return invoke(c, ctx, "ListMetricDescriptors", none, func(ctx context.Context) ([]*runtimeapi.MetricDescriptor, error) {
		resp, err := c.runtime.ListMetricDescriptors(ctx, &runtimeapi.ListMetricDescriptorsRequest{})
		return resp.GetDescriptors(), err
	})
}

// ListPodSandboxMetrics returns the metrics of all pod sandboxes.
func (c *Client) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	return invoke(c, ctx, "ListPodSandboxMetrics", none, func(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
		resp, err := c.runtime.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
		return resp.GetPodMetrics(), err
	})
}
