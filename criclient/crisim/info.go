package crisim

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Version reports the runtime name and version (WithVersion) and CRI v1.
func (r *Runtime) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return serve(ctx, r, "Version", kindRead, func() (*runtimeapi.VersionResponse, error) {
		return &runtimeapi.VersionResponse{
			Version:           "0.1.0",
			RuntimeName:       r.cfg.runtimeName,
			RuntimeVersion:    r.cfg.runtimeVersion,
			RuntimeApiVersion: "v1",
		}, nil
	})
}

// Status reports RuntimeReady and NetworkReady true.
func (r *Runtime) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return serve(ctx, r, "Status", kindRead, func() (*runtimeapi.StatusResponse, error) {
		return &runtimeapi.StatusResponse{
			Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
				{Type: runtimeapi.RuntimeReady, Status: true},
				{Type: runtimeapi.NetworkReady, Status: true},
			}},
			RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: ""}},
		}, nil
	})
}

// RuntimeConfig reports the systemd cgroup driver, as containerd does by
// default on systemd hosts.
func (r *Runtime) RuntimeConfig(ctx context.Context, req *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return serve(ctx, r, "RuntimeConfig", kindRead, func() (*runtimeapi.RuntimeConfigResponse, error) {
		return &runtimeapi.RuntimeConfigResponse{
			Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD},
		}, nil
	})
}
