package kubelethost

import (
	"fmt"
	"regexp"
	"time"
)

// Option configures New and Start.
type Option func(*config)

type config struct {
	binDir        string
	nodeName      string
	imageEndpoint string
	featureGates  map[string]bool
	maxRestart    time.Duration
	parallelPulls *int // WithParallelImagePulls; nil: the kubelet's serial pulls
	pullQPS       *int // WithRegistryPullQPS; nil: the kubelet's 5
	verbosity     int
	startTimeout  time.Duration
	stopTimeout   time.Duration
	fileCheck     time.Duration
	configEdits   []func(map[string]any)
	kubeconfig    []byte       // registered mode when not nil
	err           *ConfigError // the first bad option
}

func (c *config) refuse(option, format string, args ...any) {
	if c.err == nil {
		c.err = &ConfigError{Option: option, Reason: fmt.Sprintf(format, args...)}
	}
}

// WithBinDir takes the kubelet binary from dir instead of SYNCPOD_NODE_BIN
// or $HOME/.cache/syncpod/node/bin (where hack/install-kube.sh puts it).
func WithBinDir(dir string) Option {
	return func(c *config) {
		if dir == "" {
			c.refuse("WithBinDir", "dir must not be empty")
			return
		}
		c.binDir = dir
	}
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$`)

// WithNodeName sets the node name (--hostname-override), which the kubelet
// appends to every static pod's name. Default: "kh-" and random hex. It
// must be a DNS label of at most 42 characters, so that pod names built
// from it stay valid.
func WithNodeName(name string) Option {
	return func(c *config) {
		if !dnsLabel.MatchString(name) {
			c.refuse("WithNodeName", "%q is not a lower-case DNS label of at most 42 characters", name)
			return
		}
		c.nodeName = name
	}
}

// WithImageEndpoint sends the kubelet's image calls to another CRI endpoint
// than its runtime calls (default: the runtime endpoint).
func WithImageEndpoint(endpoint string) Option {
	return func(c *config) {
		if _, err := socketPath(endpoint); err != nil {
			c.refuse("WithImageEndpoint", "%v", err)
			return
		}
		c.imageEndpoint = endpoint
	}
}

// WithFeatureGate sets one of the kubelet's feature gates
// ("EventedPLEG", true). Later calls for the same gate win.
func WithFeatureGate(name string, enabled bool) Option {
	return func(c *config) {
		if name == "" {
			c.refuse("WithFeatureGate", "name must not be empty")
			return
		}
		if c.featureGates == nil {
			c.featureGates = map[string]bool{}
		}
		c.featureGates[name] = enabled
	}
}

// WithParallelImagePulls lets the kubelet pull images in parallel
// (serializeImagePulls: false), at most n at once (maxParallelImagePulls;
// 0 = no limit, the kubelet's own default once pulls are not serial). A
// negative n is refused. Without this option the kubelet pulls one image
// at a time.
func WithParallelImagePulls(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.refuse("WithParallelImagePulls", "%d is negative", n)
			return
		}
		c.parallelPulls = &n
	}
}

// WithRegistryPullQPS limits the kubelet's image pulls to qps a second
// (registryPullQPS, with the kubelet's burst of 10; 0 = no limit). A
// negative qps is refused. Without this option the kubelet's default of 5
// holds, and a pull over it fails rather than waits.
func WithRegistryPullQPS(qps int) Option {
	return func(c *config) {
		if qps < 0 {
			c.refuse("WithRegistryPullQPS", "%d is negative", qps)
			return
		}
		c.pullQPS = &qps
	}
}

// WithMaxContainerRestartPeriod caps the kubelet's crash-loop back-off
// (crashLoopBackOff.maxContainerRestartPeriod; the kubelet's own default is
// 300 s). Default here: 0, which keeps the kubelet's default. The kubelet
// accepts 1 s to 300 s, so tests that wait for restarts stay short.
func WithMaxContainerRestartPeriod(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.refuse("WithMaxContainerRestartPeriod", "%v is negative", d)
			return
		}
		if d != 0 && (d < time.Second || d > 300*time.Second || d%time.Second != 0) {
			c.refuse("WithMaxContainerRestartPeriod", "%v is not a whole number of seconds from 1s to 300s", d)
			return
		}
		c.maxRestart = d
	}
}

// WithVerbosity sets the kubelet's log verbosity (-v; default 0).
func WithVerbosity(v int) Option {
	return func(c *config) {
		if v < 0 {
			c.refuse("WithVerbosity", "%d is negative", v)
			return
		}
		c.verbosity = v
	}
}

// WithStartTimeout bounds how long New waits for the kubelet's healthz
// endpoint to answer (default 2 min: the kubelet starts in seconds, but
// the machines this runs on are small and busy).
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.refuse("WithStartTimeout", "%v is not positive", d)
			return
		}
		c.startTimeout = d
	}
}

// WithStopTimeout is how long Close waits after SIGTERM before it sends
// SIGKILL (default 20 s).
func WithStopTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.refuse("WithStopTimeout", "%v is not positive", d)
			return
		}
		c.stopTimeout = d
	}
}

// WithFileCheckFrequency sets how often the kubelet rereads the manifest
// directory (fileCheckFrequency; default here 5 s). The kubelet also
// watches the directory, so new manifests are usually seen at once; the
// period bounds how late a missed change is noticed.
func WithFileCheckFrequency(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.refuse("WithFileCheckFrequency", "%v is not positive", d)
			return
		}
		c.fileCheck = d
	}
}

// WithConfigEdit changes the KubeletConfiguration (as decoded JSON) before
// it is written, for settings no other option covers. Edits run in order,
// after the package's own settings.
func WithConfigEdit(edit func(kubeletConfig map[string]any)) Option {
	return func(c *config) {
		if edit == nil {
			c.refuse("WithConfigEdit", "edit must not be nil")
			return
		}
		c.configEdits = append(c.configEdits, edit)
	}
}

// WithKubeconfig registers the kubelet to the API server the kubeconfig
// names (controlplane.ControlPlane.Kubeconfig gives one): it creates its
// Node object, renews its Lease in kube-node-lease and posts node status,
// so the Node's Ready condition, its reason and message are what an
// operator would see. Pods still come from static manifests (the kubelet
// creates their mirror pods); with no scheduler, an API pod must name the
// node. Without this option the kubelet is standalone.
func WithKubeconfig(kubeconfig []byte) Option {
	return func(c *config) {
		if len(kubeconfig) == 0 {
			c.refuse("WithKubeconfig", "kubeconfig must not be empty")
			return
		}
		c.kubeconfig = append([]byte(nil), kubeconfig...)
	}
}
