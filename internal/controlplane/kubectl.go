package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const kubectlName = "kubectl"

// KubectlError is a kubectl run by Kubectl that did not succeed.
type KubectlError struct {
	// Args are the arguments Kubectl was given (after --kubeconfig).
	Args []string
	// Stderr is the start of what kubectl wrote to its standard error.
	Stderr string
	// Err is the run's error (an *exec.ExitError for a non-zero exit).
	Err error
}

func (e *KubectlError) Error() string {
	return fmt.Sprintf("controlplane: kubectl %s: %v: %s", strings.Join(e.Args, " "), e.Err, e.Stderr)
}

// Unwrap returns the cause.
func (e *KubectlError) Unwrap() error { return e.Err }

// Kubectl runs kubectl (APIServerVersion, from the directory the control
// plane's binaries come from) as the admin user, with --kubeconfig set to
// KubeconfigPath and then args, and returns its standard output:
//
//	out, err := cp.Kubectl(ctx, "get", "pods", "-n", "web", "-o", "json")
//
// Flags in args override the kubeconfig's (--token=... runs as another
// user). A missing kubectl is an error wrapping ErrUnavailable, a run
// that fails (non-zero exit, ctx done: kubectl is killed) a
// *KubectlError holding its standard error.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd, err := cp.KubectlCommand(ctx, args...)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := stderr.String()
		if len(msg) > 4096 {
			msg = msg[:4096]
		}
		return stdout.Bytes(), &KubectlError{Args: args, Stderr: strings.TrimSpace(msg), Err: err}
	}
	return stdout.Bytes(), nil
}

// KubectlCommand is the kubectl Kubectl runs, not started: for a kubectl
// that streams (logs -f, attach, port-forward), whose output the caller
// reads as it comes (cmd.StdoutPipe) and which it ends itself (ctx, or
// cmd.Process.Kill) and waits for. A missing kubectl is an error wrapping
// ErrUnavailable.
func (cp *ControlPlane) KubectlCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	if cp == nil || cp.apiBin == "" {
		return nil, errZero
	}
	if ctx == nil {
		return nil, errors.New("controlplane: Kubectl needs a ctx")
	}
	cp.mu.Lock()
	closed := cp.closed
	cp.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	bin := filepath.Join(cp.binDir, kubectlName)
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("%w: no %s binary at %s; %s", ErrUnavailable, kubectlName, bin, installHint)
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig=" + cp.KubeconfigPath}, args...)...)
	cmd.Dir = cp.Dir
	// No cache or config of the user's: everything kubectl writes stays
	// in Dir.
	cmd.Env = append(os.Environ(), "HOME="+cp.Dir, "KUBECONFIG=", "KUBECACHEDIR="+filepath.Join(cp.Dir, "kubectl-cache"))
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}
