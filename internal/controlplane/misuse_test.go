package controlplane_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncpod/syncpod/internal/controlplane"
)

func TestBadOptionsAreConfigErrors(t *testing.T) {
	for name, opt := range map[string]controlplane.Option{
		"WithBinDir":         controlplane.WithBinDir(""),
		"WithStartTimeout":   controlplane.WithStartTimeout(0),
		"WithStopTimeout":    controlplane.WithStopTimeout(-time.Second),
		"WithAPIServerFlags": controlplane.WithAPIServerFlags("v=2"),
	} {
		_, err := controlplane.New(opt)
		var ce *controlplane.ConfigError
		if !errors.As(err, &ce) || ce.Option != name {
			t.Errorf("%s: New = %v, want a *ConfigError for %s", name, err, name)
		}
	}
}

func TestMissingBinariesAreUnavailable(t *testing.T) {
	_, err := controlplane.New(controlplane.WithBinDir(t.TempDir()), nil)
	if !errors.Is(err, controlplane.ErrUnavailable) {
		t.Fatalf("New without binaries = %v, want ErrUnavailable", err)
	}
}

// WithRealCluster needs kube-controller-manager as well, and says so
// before anything is started.
func TestRealClusterWithoutControllerManagerIsUnavailable(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := controlplane.New(controlplane.WithBinDir(dir), controlplane.WithRealCluster())
	if !errors.Is(err, controlplane.ErrUnavailable) || !strings.Contains(err.Error(), "kube-controller-manager") {
		t.Fatalf("New(WithRealCluster) without kube-controller-manager = %v, want ErrUnavailable naming it", err)
	}
}

func TestZeroControlPlaneSaysUseNew(t *testing.T) {
	var zero controlplane.ControlPlane
	var nilCP *controlplane.ControlPlane
	for _, cp := range []*controlplane.ControlPlane{&zero, nilCP} {
		if err := cp.RestartAPIServer(); err == nil {
			t.Error("RestartAPIServer on a zero ControlPlane succeeded")
		}
		if err := cp.Healthy(context.Background()); err == nil {
			t.Error("Healthy on a zero ControlPlane succeeded")
		}
		if err := cp.Close(); err == nil {
			t.Error("Close on a zero ControlPlane succeeded")
		}
		var out map[string]any
		if err := cp.GetJSON(context.Background(), "/api/v1/nodes", &out); err == nil {
			t.Error("GetJSON on a zero ControlPlane succeeded")
		}
		if _, err := cp.Kubectl(context.Background(), "version"); err == nil {
			t.Error("Kubectl on a zero ControlPlane succeeded")
		}
		if _, err := cp.KubectlCommand(context.Background(), "version"); err == nil {
			t.Error("KubectlCommand on a zero ControlPlane succeeded")
		}
		if cp.Kubeconfig() != nil {
			t.Error("Kubeconfig on a zero ControlPlane returned one")
		}
	}
}
