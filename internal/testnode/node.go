package testnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PauseTag is the tag of the pause image every node pushes at start.
const PauseTag = "3.10"

// Node is a running containerd with its own registry, all private to one
// test. Its fields are read-only.
type Node struct {
	// Endpoint is the CRI endpoint, "unix:///.../containerd.sock".
	Endpoint string
	// Registry is the loopback registry's host:port, "127.0.0.1:PORT".
	Registry string
	// PauseImage is the sandbox image containerd is configured with,
	// "127.0.0.1:PORT/pause:3.10".
	PauseImage string
	// Dir holds everything the node writes: containerd's root and state,
	// its config and log, pod logs. Removed at cleanup.
	Dir string

	bins    binaries
	socket  string // Endpoint without the scheme
	cfgPath string
	logPath string
	opts    options
	reg     *loopbackRegistry
	conn    *grpc.ClientConn

	netns string // name of the node's network namespace (WithPodNetwork)

	mu     sync.Mutex
	proc   *containerdProcess // nil while containerd is down
	layers map[string][]string
	faults faultState // FreezeContainerd, SlowDisk
}

// Option configures Start.
type Option func(*options)

type options struct {
	binDir                 string
	startTimeout           time.Duration
	logLevel               string
	maxConcurrentDownloads int
	configEdits            []func(string) string
	podNetwork             bool     // WithPodNetwork
	mirrors                []string // WithMirroredRegistries
}

// WithBinDir takes the binaries from dir instead of SYNCPOD_NODE_BIN or
// $HOME/.cache/syncpod/node/bin.
func WithBinDir(dir string) Option { return func(o *options) { o.binDir = dir } }

// WithStartTimeout bounds how long Start (and RestartContainerd) wait for
// the CRI to answer Version. Default 60s.
func WithStartTimeout(d time.Duration) Option { return func(o *options) { o.startTimeout = d } }

// WithLogLevel sets containerd's log level ("debug", "info", ...; default
// "info"). The log is at Node.LogPath and its tail is printed when a test
// fails.
func WithLogLevel(level string) Option { return func(o *options) { o.logLevel = level } }

// WithMaxConcurrentDownloads sets how many layer downloads containerd runs
// at once (default 3, containerd's). containerd 2.4 pulls CRI images
// through its transfer service, so this is the transfer service's
// max_concurrent_downloads (plugins.'io.containerd.transfer.v1.local'), one
// limit shared by every pull on the node; the CRI image plugin's key of
// the same name stays at 3, since any other value there makes containerd
// fall back to its local pull path (containerd's docs/cri/config.md, "Image
// Pull Configuration (since containerd v2.1)"). Start fails t for n < 1.
func WithMaxConcurrentDownloads(n int) Option {
	return func(o *options) { o.maxConcurrentDownloads = n }
}

// WithConfigEdit rewrites the generated containerd config.toml text before
// containerd reads it, for settings no other option covers. Edits run in
// order, after the harness's own changes.
func WithConfigEdit(edit func(configTOML string) string) Option {
	return func(o *options) { o.configEdits = append(o.configEdits, edit) }
}

// Start brings up a node for t and registers its teardown with t.Cleanup.
//
// When the node cannot run here (binaries missing, not root, containerd
// not answering) the test is skipped with a message saying what is missing
// and how to install it; with SYNCPOD_REALNODE=require or CI=true it fails
// instead. SYNCPOD_REALNODE=off skips every real-node test.
func Start(t testing.TB, opts ...Option) *Node {
	t.Helper()
	m, err := currentMode()
	if err != nil {
		t.Fatal(err)
	}
	if m == modeOff {
		t.Skipf("testnode: real-node tests disabled by %s=off", EnvMode)
	}
	o := options{
		binDir:                 defaultBinDir(),
		startTimeout:           60 * time.Second,
		logLevel:               "info",
		maxConcurrentDownloads: 3,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxConcurrentDownloads < 1 {
		t.Fatalf("testnode: WithMaxConcurrentDownloads: %d is not positive", o.maxConcurrentDownloads)
	}
	bins, err := findBinaries(o.binDir)
	if err != nil {
		unavailable(t, m, err)
		return nil
	}
	reapStaleNodes(t, bins.runc)
	n, err := start(t, bins, o)
	if err != nil {
		if errors.Is(err, errUnavailable) {
			unavailable(t, m, err)
			return nil
		}
		t.Fatalf("testnode: %v", err)
	}
	return n
}

// start does the work of Start; a partly built node is torn down by the
// cleanup it registers first.
func start(t testing.TB, bins binaries, o options) (*Node, error) {
	began := time.Now()
	dir, err := os.MkdirTemp(shortTempDir(), nodeDirPattern)
	if err != nil {
		return nil, fmt.Errorf("node dir: %w", err)
	}
	n := &Node{
		Dir:    dir,
		bins:   bins,
		opts:   o,
		socket: filepath.Join(dir, "containerd.sock"),
		layers: make(map[string][]string),
	}
	n.Endpoint = "unix://" + n.socket
	n.cfgPath = n.path("config.toml")
	n.logPath = n.path("containerd.log")
	t.Cleanup(func() { n.teardown(t) })

	if err := WriteOwner(dir); err != nil {
		return nil, err
	}
	for _, d := range []string{"root", "state", "tmp", "runc", "s", "pods", "opt",
		"image-verifier", filepath.Join("cni", "bin"), filepath.Join("cni", "net.d")} {
		if err := os.MkdirAll(n.path(d), 0o700); err != nil {
			return nil, fmt.Errorf("node dir: %w", err)
		}
	}

	n.reg, err = startRegistry()
	if err != nil {
		return nil, err
	}
	n.Registry = n.reg.addr
	n.PauseImage = n.Registry + "/pause:" + PauseTag
	if err := os.MkdirAll(n.path("certs.d", n.Registry), 0o700); err != nil {
		return nil, fmt.Errorf("certs.d: %w", err)
	}
	if err := os.WriteFile(n.path("certs.d", n.Registry, "hosts.toml"), []byte(hostsToml(n.Registry)), 0o600); err != nil {
		return nil, fmt.Errorf("certs.d: %w", err)
	}
	if err := n.writeMirrors(o.mirrors); err != nil {
		return nil, err
	}
	if o.podNetwork {
		if err := n.setUpPodNetwork(); err != nil {
			return nil, err
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref, digests, err := n.pushImage(ctx, "pause", imageSpec{tag: PauseTag, cmd: []string{"pause"}})
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	n.layers[ref] = digests

	cfg, err := n.containerdConfig(&o)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(n.cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}

	n.conn, err = grpc.NewClient("unix://"+n.socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		return nil, fmt.Errorf("grpc client: %w", err)
	}
	if err := n.startContainerd(); err != nil {
		return nil, err
	}
	t.Logf("testnode: containerd %s up at %s (registry %s) in %v", ContainerdVersion, n.Endpoint, n.Registry,
		time.Since(began).Round(time.Millisecond))
	return n, nil
}

// shortTempDir keeps socket paths under the kernel's 108-byte limit even
// when TMPDIR is long.
func shortTempDir() string {
	if d := os.TempDir(); len(d) <= 16 {
		return d
	}
	return "/tmp"
}

// ownerFile records which process owns a node directory, so that a later
// run can recognise directories left by a test binary that was killed.
const ownerFile = "owner.pid"

// WriteOwner records this process as dir's owner, for OwnerGone.
func WriteOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(fmt.Sprint(os.Getpid())), 0o600)
}

func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.Dir}, elem...)...)
}

// LogPath is containerd's log file.
func (n *Node) LogPath() string { return n.logPath }

// ConfigPath is the containerd config.toml the node runs with.
func (n *Node) ConfigPath() string { return n.cfgPath }

// RuntimeService is a raw CRI runtime client on the node's own connection,
// for assertions that should not go through the code under test. The
// connection outlives RestartContainerd.
func (n *Node) RuntimeService() runtimeapi.RuntimeServiceClient {
	return runtimeapi.NewRuntimeServiceClient(n.conn)
}

// ImageService is a raw CRI image client on the node's own connection.
func (n *Node) ImageService() runtimeapi.ImageServiceClient {
	return runtimeapi.NewImageServiceClient(n.conn)
}

// BlobFetches returns how many times the registry served each blob
// ("sha256:..." -> GET requests, over all repositories): layers and image
// configs fetched by containerd. Pushes do not count.
func (n *Node) BlobFetches() map[string]int {
	return n.reg.fetches("blobs", func(_, ref string) string { return ref })
}

// ManifestFetches returns GET requests per manifest, keyed "repo:tag" or
// "repo@sha256:...", as the client asked. containerd resolves a tag with
// HEAD (see Requests) and then fetches by digest.
func (n *Node) ManifestFetches() map[string]int {
	return n.reg.fetches("manifests", func(repo, ref string) string {
		if strings.Contains(ref, ":") {
			return repo + "@" + ref
		}
		return repo + ":" + ref
	})
}

// Requests returns every request the registry served, keyed
// "METHOD /v2/...", pushes included.
func (n *Node) Requests() map[string]int { return n.reg.snapshot() }

// ResetRegistryCounts zeroes the counters behind BlobFetches,
// ManifestFetches and Requests.
func (n *Node) ResetRegistryCounts() { n.reg.reset() }

// containerdProcess is one run of containerd.
type containerdProcess struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been reaped
	err  error         // Wait's result, set before done closes
}

// startContainerd launches containerd with the node's config and waits for
// the CRI to answer.
func (n *Node) startContainerd() error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("containerd log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(n.bins.containerd, "--config", n.cfgPath)
	if n.netns != "" {
		// nsenter execs containerd: the PID stays containerd's.
		cmd = exec.Command("nsenter", "--net="+n.NetNS(), n.bins.containerd, "--config", n.cfgPath)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// The shim is found on containerd's PATH.
	cmd.Env = append(envWithout(os.Environ(), "PATH"),
		"PATH="+n.bins.dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: start containerd: %v", errUnavailable, err)
	}
	p := &containerdProcess{cmd: cmd, done: make(chan struct{})}
	_ = os.WriteFile(n.path(pidFile), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.mu.Lock()
	n.proc = p
	n.mu.Unlock()
	// A slow disk stays slow across a restart.
	if err := n.joinDisk(cmd.Process.Pid); err != nil {
		return err
	}
	n.conn.ResetConnectBackoff()
	return n.waitReady(p)
}

// waitReady polls Version until it answers, containerd exits, or the start
// timeout passes.
func (n *Node) waitReady(p *containerdProcess) error {
	deadline := time.Now().Add(n.opts.startTimeout)
	client := n.RuntimeService()
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%w: containerd exited during start (%v); log %s:\n%s",
				errUnavailable, p.err, n.logPath, LogTail(n.logPath, 30))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.Version(ctx, &runtimeapi.VersionRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil {
			return nil
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%w: CRI at %s did not answer Version within %v (last error: %v); log %s:\n%s",
		errUnavailable, n.Endpoint, n.opts.startTimeout, lastErr, n.logPath, LogTail(n.logPath, 30))
}

// ContainerdPID is the PID of the running containerd, 0 while it is down.
func (n *Node) ContainerdPID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return 0
	}
	return n.proc.cmd.Process.Pid
}

// KillContainerd sends SIGKILL to containerd and waits until it is gone,
// as a crash would. Containers keep running under their shims. Calling it
// while containerd is down does nothing.
func (n *Node) KillContainerd(t testing.TB) {
	t.Helper()
	n.stopContainerd(syscall.SIGKILL, 0)
}

// RestartContainerd stops containerd (SIGTERM, SIGKILL after 10s) if it
// runs and starts it again with the same config and state, waiting until
// the CRI answers. Containers keep running under their shims meanwhile.
func (n *Node) RestartContainerd(t testing.TB) {
	t.Helper()
	n.stopContainerd(syscall.SIGTERM, 10*time.Second)
	if err := n.startContainerd(); err != nil {
		t.Fatalf("testnode: restart containerd: %v", err)
	}
}

// SetMaxConcurrentDownloads rewrites containerd's config with k layer
// downloads at once (as WithMaxConcurrentDownloads) and restarts
// containerd with it, waiting until the CRI answers. Images, sandboxes and
// containers stay; k < 1 fails t. Like RestartContainerd, it must not run
// beside other calls on n.
func (n *Node) SetMaxConcurrentDownloads(t testing.TB, k int) {
	t.Helper()
	if k < 1 {
		t.Fatalf("testnode: SetMaxConcurrentDownloads: %d is not positive", k)
	}
	n.opts.maxConcurrentDownloads = k
	cfg, err := n.containerdConfig(&n.opts)
	if err != nil {
		t.Fatalf("testnode: %v", err)
	}
	if err := os.WriteFile(n.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatalf("testnode: config: %v", err)
	}
	n.RestartContainerd(t)
}

// stopContainerd signals containerd by its PID and waits for it to exit;
// with grace > 0 it escalates to SIGKILL after grace. A frozen containerd
// is thawed after the signal, so it acts on it as it wakes.
func (n *Node) stopContainerd(sig syscall.Signal, grace time.Duration) {
	n.mu.Lock()
	p := n.proc
	n.proc = nil
	n.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	n.endFreeze()
	if grace > 0 {
		select {
		case <-p.done:
			return
		case <-time.After(grace):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	<-p.done
}

func envWithout(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// LogTail returns the last lines of a log file, for error messages (or
// the read error, in parentheses).
func LogTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
