package controlplane

import (
	"fmt"
	"strings"
	"time"
)

// Option configures New and Start.
type Option func(*config)

type config struct {
	binDir       string
	startTimeout time.Duration
	stopTimeout  time.Duration
	extraFlags   []string
	realCluster  bool
	err          error
}

func (c *config) refuse(option, format string, args ...any) {
	if c.err == nil {
		c.err = &ConfigError{Option: option, Reason: fmt.Sprintf(format, args...)}
	}
}

// WithBinDir looks for etcd and kube-apiserver in dir instead of
// SYNCPOD_NODE_BIN or $HOME/.cache/syncpod/node/bin. An empty dir is refused.
func WithBinDir(dir string) Option {
	return func(c *config) {
		if dir == "" {
			c.refuse("WithBinDir", "is empty")
			return
		}
		c.binDir = dir
	}
}

// WithStartTimeout bounds how long each process may take to become ready
// (default 2 minutes: a loaded machine starts the API server slowly). Zero
// or negative is refused.
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.refuse("WithStartTimeout", "%v: must be positive", d)
			return
		}
		c.startTimeout = d
	}
}

// WithStopTimeout bounds how long each process may take to exit after
// SIGTERM before it is killed (default 10 s). Zero or negative is refused.
func WithStopTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.refuse("WithStopTimeout", "%v: must be positive", d)
			return
		}
		c.stopTimeout = d
	}
}

// WithAPIServerFlags adds flags ("--name=value") to kube-apiserver's
// command line, after the package's own; a later flag overrides an earlier
// one. A flag that does not start with "--" is refused.
func WithAPIServerFlags(flags ...string) Option {
	return func(c *config) {
		for _, f := range flags {
			if !strings.HasPrefix(f, "--") {
				c.refuse("WithAPIServerFlags", "%q: want --name=value", f)
				return
			}
		}
		c.extraFlags = append(c.extraFlags, flags...)
	}
}

// WithRealCluster runs the control plane as a real cluster does: the
// ServiceAccount admission plugin is on, and kube-controller-manager runs
// beside the API server with its own user, kubeconfig and serving
// certificate, running the serviceaccount, serviceaccount-token,
// root-ca-certificate-publisher, namespace, garbage-collector, deployment,
// replicaset and job controllers, each with its own service-account
// credentials. Every namespace then gets its default
// ServiceAccount and its kube-root-ca.crt ConfigMap, service-account
// tokens are issued and verified, Deployments, ReplicaSets and Jobs create
// Pods, the garbage collector follows owner references and deleted
// namespaces are emptied and removed. New returns once the default
// ServiceAccount of the default namespace exists, so a pod can be created
// at once. Without this option no controller-manager runs and pods are
// admitted without a service account.
func WithRealCluster() Option {
	return func(c *config) { c.realCluster = true }
}
