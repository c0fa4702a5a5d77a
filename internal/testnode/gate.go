package testnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Environment variables that control the harness.
const (
	// EnvMode selects what happens when no node can be started:
	// "require" fails the test, "off" skips every real-node test, and ""
	// or "auto" skips with a message saying what is missing.
	EnvMode = "SYNCPOD_REALNODE"
	// EnvBinDir names the directory holding containerd,
	// containerd-shim-runc-v2 and runc. Default: $HOME/.cache/syncpod/node/bin,
	// where hack/install-realnode.sh puts them.
	EnvBinDir = "SYNCPOD_NODE_BIN"
	// EnvCI, set to "true" as CI systems do, implies EnvMode=require.
	EnvCI = "CI"
)

// ContainerdVersion is the containerd release the harness is written for.
const ContainerdVersion = "2.4.2"

const installHint = "install the binaries with: bash hack/install-realnode.sh " +
	"(from the repository root; needs only Go and gcc; or point " + EnvBinDir + " at a directory holding them)"

// mode is the parsed EnvMode.
type mode int

const (
	modeAuto mode = iota
	modeRequire
	modeOff
)

func currentMode() (mode, error) {
	v := strings.TrimSpace(os.Getenv(EnvMode))
	switch strings.ToLower(v) {
	case "off":
		return modeOff, nil
	case "require":
		return modeRequire, nil
	case "", "auto":
		if os.Getenv(EnvCI) == "true" {
			return modeRequire, nil
		}
		return modeAuto, nil
	default:
		return modeAuto, fmt.Errorf("testnode: %s=%q is not one of require, auto, off", EnvMode, v)
	}
}

// errUnavailable marks reasons the node cannot run on this machine, as
// opposed to bugs; they skip a test unless a node is required.
var errUnavailable = errors.New("real node unavailable")

// unavailable reports that no node can be had, failing or skipping t
// according to the mode.
func unavailable(t testing.TB, m mode, err error) {
	t.Helper()
	if m == modeRequire {
		t.Fatalf("testnode: %v\n(%s=require or %s=true: a real node is required; %s=off skips)", err, EnvMode, EnvCI, EnvMode)
	}
	t.Skipf("testnode: %v (set %s=require to make this a failure)", err, EnvMode)
}

// defaultBinDir returns where the install script puts the binaries.
func defaultBinDir() string {
	if d := os.Getenv(EnvBinDir); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "syncpod", "node", "bin")
}

// binaries are the absolute paths of the programs a node runs.
type binaries struct {
	dir, containerd, shim, runc string
}

// findBinaries checks that everything a node needs is on this machine and
// says exactly what is missing otherwise.
func findBinaries(dir string) (binaries, error) {
	b := binaries{
		dir:        dir,
		containerd: filepath.Join(dir, "containerd"),
		shim:       filepath.Join(dir, "containerd-shim-runc-v2"),
		runc:       filepath.Join(dir, "runc"),
	}
	var missing []string
	for _, p := range []string{b.containerd, b.shim, b.runc} {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("%w: missing %s; %s", errUnavailable, strings.Join(missing, ", "), installHint)
	}
	out, err := exec.Command(b.containerd, "--version").CombinedOutput()
	if err != nil {
		return b, fmt.Errorf("%w: %s --version: %v: %s; %s", errUnavailable, b.containerd, err, out, installHint)
	}
	if !strings.Contains(string(out), " "+ContainerdVersion) && !strings.Contains(string(out), " v"+ContainerdVersion) {
		return b, fmt.Errorf("%w: %s is %q, want containerd %s; %s", errUnavailable, b.containerd,
			strings.TrimSpace(string(out)), ContainerdVersion, installHint)
	}
	if os.Geteuid() != 0 {
		return b, fmt.Errorf("%w: running containers needs root (euid is %d)", errUnavailable, os.Geteuid())
	}
	if _, err := exec.LookPath("go"); err != nil {
		if _, err2 := os.Stat(goTool()); err2 != nil {
			return b, fmt.Errorf("%w: the go command is needed to build the workload program: %v", errUnavailable, err)
		}
	}
	return b, nil
}

// Need fails or skips t, by the same rule as [Start], when err says a
// prerequisite of a real-node test is missing (a binary, an image, a Debian
// package): under SYNCPOD_REALNODE=require or CI=true it is a failure naming
// what is missing, otherwise a skip. It does nothing when err is nil. Every
// real-node test that can be missing something goes through Need or Start,
// so that CI never reports a silent skip as a pass.
func Need(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	m, merr := currentMode()
	if merr != nil {
		t.Fatal(merr)
	}
	if m == modeOff {
		t.Skipf("testnode: disabled by %s=off", EnvMode)
	}
	unavailable(t, m, fmt.Errorf("%s: %v", what, err))
}
