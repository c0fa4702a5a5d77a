package testnode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"
)

// WithPodNetwork gives pods their own network: the node gets a network
// namespace of its own (made with `ip netns add`, removed at teardown),
// containerd runs inside it (started with `nsenter --net`, never `ip netns
// exec`, which remounts /sys and hides the cgroup mounts), the registry
// also listens inside it on the same address, and a CNI bridge network
// with host-local IPAM (10.244.0.0/24) and loopback gives each pod an IP.
// Pod traffic never leaves the namespace. Node.NetNS names it, so a test
// can run a client there (`nsenter --net=NETNS ...`). Needs the CNI plugins
// installed by hack/install-realnode.sh (bin/cni).
func WithPodNetwork() Option { return func(o *options) { o.podNetwork = true } }

// WithMirroredRegistries sends pulls of the named registries
// ("registry.k8s.io", "gcr.io", ...) to the node's loopback registry
// through a certs.d hosts.toml per registry, so an image pushed with
// PushFiles (or PushImage) as "e2e-test-images/busybox" is what containerd
// pulls for "registry.k8s.io/e2e-test-images/busybox".
func WithMirroredRegistries(hosts ...string) Option {
	return func(o *options) { o.mirrors = append(o.mirrors, hosts...) }
}

// NetNS is the path of the node's network namespace
// ("/var/run/netns/NAME"), or "" without WithPodNetwork.
func (n *Node) NetNS() string {
	if n.netns == "" {
		return ""
	}
	return filepath.Join("/var/run/netns", n.netns)
}

// setUpPodNetwork makes the namespace, serves the registry in it and
// writes the CNI config. Called by start once the registry runs.
func (n *Node) setUpPodNetwork() error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	n.netns = fmt.Sprintf("syncpod-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	if out, err := exec.Command("ip", "netns", "add", n.netns).CombinedOutput(); err != nil {
		n.netns = ""
		return fmt.Errorf("%w: ip netns add: %v: %s", errUnavailable, err, out)
	}
	if out, err := exec.Command("ip", "-n", n.netns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fmt.Errorf("ip -n %s link set lo up: %v: %s", n.netns, err, out)
	}
	l, err := listenInNetNS(n.NetNS(), n.Registry)
	if err != nil {
		return fmt.Errorf("registry in %s: %w", n.netns, err)
	}
	n.reg.serveAlso(l)

	cniSrc := filepath.Join(n.bins.dir, "cni")
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(cniSrc, p)); err != nil {
			return fmt.Errorf("%w: CNI plugin %s: %v (run hack/install-realnode.sh)", errUnavailable, p, err)
		}
		if err := os.Symlink(filepath.Join(cniSrc, p), n.path("cni", "bin", p)); err != nil {
			return fmt.Errorf("CNI plugin %s: %w", p, err)
		}
	}
	return os.WriteFile(n.path("cni", "net.d", "10-syncpod.conflist"), []byte(cniConflist), 0o600)
}

const cniConflist = `{
  "cniVersion": "1.0.0",
  "name": "syncpod",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "syncpod0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "10.244.0.0/24"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
`

// writeMirrors writes a hosts.toml per mirrored registry.
func (n *Node) writeMirrors(hosts []string) error {
	for _, h := range hosts {
		if err := os.MkdirAll(n.path("certs.d", h), 0o700); err != nil {
			return fmt.Errorf("certs.d: %w", err)
		}
		if err := os.WriteFile(n.path("certs.d", h, "hosts.toml"), []byte(hostsToml(n.Registry)), 0o600); err != nil {
			return fmt.Errorf("certs.d: %w", err)
		}
	}
	return nil
}

// removeNetNS deletes the node's namespace (after containerd stopped).
func (n *Node) removeNetNS() error {
	if n.netns == "" {
		return nil
	}
	if out, err := exec.Command("ip", "netns", "delete", n.netns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns delete %s: %v: %s", n.netns, err, out)
	}
	return nil
}

// listenInNetNS opens a TCP listener inside the namespace at path: the
// socket keeps belonging to that namespace whatever thread serves it.
func listenInNetNS(path, addr string) (net.Listener, error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	target, err := os.Open(path)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("setns: %w", err)
	}
	l, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the wrong namespace: keep it locked so
		// the runtime retires it with this goroutine.
		if l != nil {
			_ = l.Close()
		}
		return nil, fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	return l, lerr
}

// File is one file of an image built by PushFiles.
type File struct {
	// Data is the content; ignored for links.
	Data []byte
	// Mode is the permission bits (0644 when zero).
	Mode int64
	// Link, when set, makes the file a symbolic link to Link.
	Link string
}

// PushFiles pushes a one-layer image holding files (path -> File;
// directories are made as needed) with the given entrypoint and command
// as repo:tag and returns its reference on the node's registry. With
// WithMirroredRegistries, push "e2e-test-images/busybox" to serve
// "registry.k8s.io/e2e-test-images/busybox". Failures fail the test.
func (n *Node) PushFiles(t testing.TB, repo, tag string, files map[string]File, entrypoint, cmd []string) string {
	t.Helper()
	ref, err := n.pushFiles(repo, tag, files, entrypoint, cmd)
	if err != nil {
		t.Fatalf("testnode: %v", err)
	}
	return ref
}

func (n *Node) pushFiles(repo, tag string, files map[string]File, entrypoint, cmd []string) (string, error) {
	gz, err := filesTarGz(files)
	if err != nil {
		return "", err
	}
	layer, err := layerFromGz(gz)
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: entrypoint, Cmd: cmd, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	refStr := n.Registry + "/" + strings.TrimPrefix(repo, "/") + ":" + tag
	ref, err := name.ParseReference(refStr, name.Insecure)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithTransport(tr)); err != nil {
		return "", fmt.Errorf("push %s: %w", refStr, err)
	}
	return refStr, nil
}

func filesTarGz(files map[string]File) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, strings.TrimPrefix(p, "/"))
	}
	sort.Strings(paths)
	dirs := map[string]bool{}
	for _, p := range paths {
		for d := filepath.Dir(p); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	for _, p := range paths {
		f := files[p]
		if f.Data == nil && f.Link == "" {
			f = files["/"+p]
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: p, Mode: mode, ModTime: time.Unix(0, 0)}
		if f.Link != "" {
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, f.Link
		} else {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if f.Link == "" {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
