package kubelethost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/syncpod/syncpod/internal/testnode"
)

// Version is the kubelet release the package is written for (its config
// fields and flags); hack/install-kube.sh installs it.
const Version = "v1.37.2"

const installHint = "install it with: bash hack/install-kube.sh (from the repository root; " +
	"or point " + testnode.EnvBinDir + " at a directory holding kubelet)"

// dirPattern names kubelet directories, so that a later run can find those
// a killed test binary left behind.
const dirPattern = "kubelethost-"

// pidFile in a kubelet directory names the kubelet's process (the owner
// file, testnode.WriteOwner, names the test binary's).
const pidFile = "kubelet.pid"

// Kubelet is a running kubelet, standalone (pods come from static
// manifests in ManifestDir) or registered to an API server
// (WithKubeconfig). It runs in a mount namespace of its
// own in which /var/lib, /var/log and the kernel settings it would change
// are private files, so the machine is left as it was. Create it with New
// or Start; its exported fields are read-only.
type Kubelet struct {
	// Endpoint is the CRI endpoint the kubelet uses for runtime calls.
	Endpoint string
	// NodeName is the kubelet's node name; a static pod "web" runs as
	// "web-" + NodeName.
	NodeName string
	// Dir holds everything the kubelet writes: config, log, root dir, pod
	// logs. Close removes it.
	Dir string
	// ManifestDir is the static pod directory.
	ManifestDir string
	// RootDir is the kubelet's --root-dir.
	RootDir string
	// LogPath is the kubelet's log (its stderr, klog text format).
	LogPath string
	// Port is the authenticated HTTPS port (open to everyone here:
	// anonymous access with AlwaysAllow), ReadOnlyPort the plain HTTP
	// read-only port and HealthzPort the healthz ping port, all on
	// 127.0.0.1.
	Port, ReadOnlyPort, HealthzPort int

	cfg  config
	cmd  *exec.Cmd
	done chan struct{} // closed once the process is reaped
	werr error         // Wait's result, set before done closes

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

// New starts a kubelet whose runtime is the CRI at endpoint
// ("unix:///path") and waits until its healthz endpoints answer. Missing
// prerequisites give an error wrapping ErrUnavailable, bad options a
// *ConfigError, a kubelet that exits or does not answer a *StartError.
// Nothing is left running or on disk when New fails.
func New(endpoint string, opts ...Option) (*Kubelet, error) {
	c := config{
		binDir:       defaultBinDir(),
		startTimeout: 2 * time.Minute,
		stopTimeout:  20 * time.Second,
		fileCheck:    5 * time.Second,
	}
	if _, err := socketPath(endpoint); err != nil {
		return nil, &ConfigError{Option: "endpoint", Reason: err.Error()}
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	bin, err := findKubelet(c.binDir)
	if err != nil {
		return nil, err
	}
	reapStaleOnce()
	if c.nodeName == "" {
		c.nodeName = "kh-" + randomHex(4)
	}
	dir, err := os.MkdirTemp("/tmp", dirPattern)
	if err != nil {
		return nil, fmt.Errorf("kubelethost: %w", err)
	}
	k, err := launch(bin, dir, endpoint, c)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return k, nil
}

// defaultBinDir is where testnode looks for the node's binaries, so that
// one SYNCPOD_NODE_BIN serves both.
func defaultBinDir() string {
	if d := os.Getenv(testnode.EnvBinDir); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "syncpod", "node", "bin")
}

// findKubelet checks everything the kubelet needs on this machine and
// says exactly what is missing.
func findKubelet(dir string) (string, error) {
	bin := filepath.Join(dir, "kubelet")
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: no kubelet binary at %s; %s", ErrUnavailable, bin, installHint)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%w: %s --version: %v: %s; %s", ErrUnavailable, bin, err, out, installHint)
	}
	if got := strings.TrimSpace(string(out)); got != "Kubernetes "+Version {
		return "", fmt.Errorf("%w: %s is %q, want Kubernetes %s; %s", ErrUnavailable, bin, got, Version, installHint)
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: the kubelet needs root (euid is %d)", ErrUnavailable, os.Geteuid())
	}
	for _, tool := range []string{"unshare", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("%w: %s (Debian package util-linux / mount) is needed for the kubelet's private mount namespace: %v",
				ErrUnavailable, tool, err)
		}
	}
	return bin, nil
}

// kernelTunables are the sysctls the kubelet sets at start whatever
// protectKernelDefaults says, with the values it wants. Each is covered,
// in the kubelet's mount namespace, by a file that already holds that
// value, so it finds nothing to change.
var kernelTunables = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// namespaceScript runs as the first process of the kubelet's mount
// namespace: it covers what the kubelet would change on the host, then
// becomes the kubelet (exec), so the PID the test holds is the kubelet's.
// unshare's --propagation slave lets the host's mounts (containerd's)
// still appear inside while nothing made inside leaks out.
const namespaceScript = `set -e
mount --bind "$KH_DIR/host/var-lib" /var/lib
mount --bind "$KH_DIR/host/var-log" /var/log
for f in $KH_SYSCTLS; do
	mount --bind "$KH_DIR/host/sysctl/$(echo "$f" | tr / _)" "/proc/sys/$f"
done
exec "$@"
`

func launch(bin, dir, endpoint string, c config) (*Kubelet, error) {
	l := layout{dir: dir}
	if err := testnode.WriteOwner(dir); err != nil {
		return nil, fmt.Errorf("kubelethost: %w", err)
	}
	for _, d := range []string{l.manifests(), l.root(), l.certs(), l.podLogs(), l.volumePlugins(),
		l.path("host", "var-lib"), l.path("host", "var-log"), l.path("host", "sysctl")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("kubelethost: %w", err)
		}
	}
	var sysctls []string
	for name, value := range kernelTunables {
		if _, err := os.Stat("/proc/sys/" + name); err != nil {
			continue // not on this kernel: the kubelet cannot change it either
		}
		sysctls = append(sysctls, name)
		f := l.path("host", "sysctl", strings.ReplaceAll(name, "/", "_"))
		if err := os.WriteFile(f, []byte(value+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("kubelethost: %w", err)
		}
	}
	p, err := freePorts()
	if err != nil {
		return nil, err
	}
	kc, err := kubeletConfig(&c, l, p, endpoint)
	if err != nil {
		return nil, fmt.Errorf("kubelethost: config: %w", err)
	}
	if err := os.WriteFile(l.configFile(), kc, 0o600); err != nil {
		return nil, fmt.Errorf("kubelethost: %w", err)
	}
	if c.kubeconfig != nil {
		if err := os.WriteFile(l.kubeconfig(), c.kubeconfig, 0o600); err != nil {
			return nil, fmt.Errorf("kubelethost: %w", err)
		}
	}
	logf, err := os.OpenFile(l.logFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kubelethost: %w", err)
	}
	defer logf.Close()

	args := []string{"--mount", "--propagation", "slave", "--", "/bin/sh", "-c", namespaceScript, "kubelethost",
		bin,
		"--config=" + l.configFile(),
		"--root-dir=" + l.root(),
		"--cert-dir=" + l.certs(),
		"--hostname-override=" + c.nodeName,
		"-v=" + strconv.Itoa(c.verbosity),
	}
	if c.kubeconfig != nil {
		args = append(args, "--kubeconfig="+l.kubeconfig())
	}
	cmd := exec.Command("unshare", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "KH_DIR="+dir, "KH_SYSCTLS="+strings.Join(sysctls, " "))
	// A test binary killed before its cleanups ran takes its kubelet
	// with it; reapStale catches the rest.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start unshare: %v", ErrUnavailable, err)
	}
	k := &Kubelet{
		Endpoint:     endpoint,
		NodeName:     c.nodeName,
		Dir:          dir,
		ManifestDir:  l.manifests(),
		RootDir:      l.root(),
		LogPath:      l.logFile(),
		Port:         p.secure,
		ReadOnlyPort: p.readOnly,
		HealthzPort:  p.healthz,
		cfg:          c,
		cmd:          cmd,
		done:         make(chan struct{}),
		closed:       make(chan struct{}),
	}
	_ = os.WriteFile(l.path(pidFile), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	go func() {
		k.werr = cmd.Wait()
		close(k.done)
	}()
	if err := k.waitHealthy(); err != nil {
		k.stop()
		return nil, &StartError{Dir: dir, LogTail: testnode.LogTail(l.logFile(), 40), Err: err}
	}
	return k, nil
}

// waitHealthy polls the healthz port and the read-only port's /healthz
// until both say ok, the kubelet exits, or the start timeout passes.
func (k *Kubelet) waitHealthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.startTimeout)
	defer cancel()
	var last error
	for {
		select {
		case <-k.done:
			return fmt.Errorf("the kubelet exited: %v", k.werr)
		default:
		}
		last = k.ping(ctx)
		if last == nil {
			last = k.Healthz(ctx)
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy within %v: %w", k.cfg.startTimeout, last)
		case <-k.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// errZero is what a Kubelet not made by New or Start answers.
var errZero = errors.New("kubelethost: a zero Kubelet cannot be used; use New or Start")

// usable says why k cannot be used, or nil.
func (k *Kubelet) usable() error {
	if k == nil || k.cmd == nil {
		return errZero
	}
	if k.isClosed() {
		return ErrClosed
	}
	return nil
}

// PID is the kubelet's process id (0 for a zero Kubelet).
func (k *Kubelet) PID() int {
	if k == nil || k.cmd == nil {
		return 0
	}
	return k.cmd.Process.Pid
}

// Exited reports whether the kubelet process has ended (by Close or on its
// own) and, if so, how.
func (k *Kubelet) Exited() (bool, error) {
	if k == nil || k.cmd == nil {
		return false, errZero
	}
	select {
	case <-k.done:
		return true, k.werr
	default:
		return false, nil
	}
}

// Close stops the kubelet by its PID (SIGTERM, then SIGKILL after the stop
// timeout), waits for it to exit and removes Dir. The pods it started keep
// running: they belong to the runtime, which the caller tears down. Close
// is idempotent; later calls return what the first returned.
func (k *Kubelet) Close() error {
	if k == nil || k.cmd == nil {
		return errZero
	}
	k.closeOnce.Do(func() {
		close(k.closed)
		k.stop()
		k.closeErr = removeDir(k.Dir)
	})
	return k.closeErr
}

// stop signals the kubelet and waits until it has been reaped.
func (k *Kubelet) stop() {
	select {
	case <-k.done:
		return
	default:
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(k.cfg.stopTimeout):
		_ = k.cmd.Process.Signal(syscall.SIGKILL)
		<-k.done
	}
}

func (k *Kubelet) isClosed() bool {
	select {
	case <-k.closed:
		return true
	default:
		return false
	}
}

// freePorts finds three free loopback ports. Another process could take
// one before the kubelet binds it; the kubelet then fails to start, with
// the reason in its log.
func freePorts() (ports, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var nums [3]int
	for i := range nums {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports{}, fmt.Errorf("kubelethost: free port: %w", err)
		}
		ls = append(ls, l)
		nums[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports{secure: nums[0], readOnly: nums[1], healthz: nums[2]}, nil
}

// socketPath returns the file of a "unix:///abs/path" endpoint.
func socketPath(endpoint string) (string, error) {
	p, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok || !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q is not unix:///absolute/path", endpoint)
	}
	return p, nil
}

// Tail returns the last n lines of the kubelet's log.
func (k *Kubelet) Tail(n int) string { return testnode.LogTail(k.LogPath, n) }

var errNotRunning = errors.New("the kubelet is not running")

func removeDir(dir string) error {
	if err := testnode.RemoveAll(dir); err != nil {
		return fmt.Errorf("kubelethost: %w", err)
	}
	return nil
}
