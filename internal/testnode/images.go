package testnode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WorkloadPath is where the workload program sits in every image the
// harness builds; it is the images' entrypoint.
const WorkloadPath = "/workload"

const workloadPackage = "github.com/syncpod/syncpod/internal/testnode/workload"

// The workload program is built once per test binary and kept in memory.
var (
	workloadOnce sync.Once
	workloadBin  []byte
	workloadErr  error
)

// goTool returns the go command: the one on PATH, else the one in
// GOROOT's bin (go test puts it first on PATH anyway).
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

// The program layer is built once too: the same bytes in every image, as
// a shared base layer would be.
var (
	programLayerOnce sync.Once
	programLayerGz   []byte
	programLayerErr  error
)

// programLayer returns the gzipped tar holding the workload program at
// WorkloadPath.
func programLayer() ([]byte, error) {
	programLayerOnce.Do(func() {
		prog, err := workloadProgram()
		if err != nil {
			programLayerErr = err
			return
		}
		programLayerGz, err = tarGz(WorkloadPath, 0o755, prog, gzip.BestSpeed)
		if err != nil {
			programLayerErr = fmt.Errorf("program layer: %w", err)
		}
	})
	return programLayerGz, programLayerErr
}

// workloadProgram returns the statically linked workload binary.
func workloadProgram() ([]byte, error) {
	workloadOnce.Do(func() {
		workloadBin, workloadErr = buildWorkload()
	})
	return workloadBin, workloadErr
}

func buildWorkload() ([]byte, error) {
	tmp, err := os.MkdirTemp("", "syncpod-workload-")
	if err != nil {
		return nil, fmt.Errorf("build workload: %w", err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "workload")
	cmd := exec.Command(goTool(), "build", "-trimpath", "-ldflags=-s -w", "-o", out, workloadPackage)
	cmd.Dir = moduleDir()
	// GOFLAGS is replaced: a -race from the test's environment cannot
	// build without cgo.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=-buildvcs=false")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build workload: go build %s: %w: %s", workloadPackage, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("build workload: %w", err)
	}
	return b, nil
}

// moduleDir finds the module root from this file's location, falling back
// to the working directory (go test runs in the package directory, which
// is inside the module).
func moduleDir() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Dir(filepath.Dir(filepath.Dir(file)))
	}
	wd, _ := os.Getwd()
	return wd
}

// ImageOption shapes an image built by PushImage.
type ImageOption func(*imageSpec)

type imageSpec struct {
	tag    string
	size   int64
	layers int
	cmd    []string
}

// WithTag sets the image tag (default "latest").
func WithTag(tag string) ImageOption { return func(s *imageSpec) { s.tag = tag } }

// WithSize pads the image with random, incompressible data so that its
// layers add up to at least bytes (compressed, as pulled). The program layer
// is about 1 MiB; a smaller size adds nothing.
func WithSize(bytes int64) ImageOption { return func(s *imageSpec) { s.size = bytes } }

// WithLayers gives the image n layers: the program layer and n-1 layers of
// random data (the padding of WithSize split between them; 4 KiB each
// without WithSize). The program layer is identical in every image, like a
// shared base layer (containerd fetches it once per node); every image gets
// fresh random padding, so no two images share a padding layer.
func WithLayers(n int) ImageOption { return func(s *imageSpec) { s.layers = n } }

// WithCmd sets the image's default arguments to the workload program
// (default "pause"); a container's Args replace them.
func WithCmd(args ...string) ImageOption { return func(s *imageSpec) { s.cmd = args } }

// tarGz builds a gzip-compressed tar holding one regular file.
func tarGz(path string, mode int64, content []byte, level int) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, level)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{
		Name:     strings.TrimPrefix(path, "/"),
		Mode:     mode,
		Size:     int64(len(content)),
		Typeflag: tar.TypeReg,
		ModTime:  time.Unix(0, 0),
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func layerFromGz(gz []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// randomLayer is a layer holding one file of n random bytes, stored without
// compression so that its size as pulled is about n.
func randomLayer(n int64, file string) (v1.Layer, error) {
	data := make([]byte, n)
	var seed [32]byte
	for i := range seed {
		seed[i] = byte(rand.Uint32())
	}
	_, _ = rand.NewChaCha8(seed).Read(data)
	gz, err := tarGz(file, 0o644, data, gzip.NoCompression)
	if err != nil {
		return nil, err
	}
	return layerFromGz(gz)
}

// buildImage makes a linux image for this machine's architecture holding
// the workload program and the requested padding.
func buildImage(s imageSpec) (v1.Image, error) {
	gz, err := programLayer()
	if err != nil {
		return nil, err
	}
	progLayer, err := layerFromGz(gz)
	if err != nil {
		return nil, fmt.Errorf("program layer: %w", err)
	}
	layers := []v1.Layer{progLayer}
	pads := s.layers - 1
	pad := s.size - int64(len(gz))
	if pad > 0 && pads < 1 {
		pads = 1
	}
	for i := range pads {
		n := int64(4096)
		if pad > 0 {
			n = pad / int64(pads)
			if i == pads-1 {
				n = pad - n*int64(pads-1)
			}
			n = max(n, 1)
		}
		l, err := randomLayer(n, fmt.Sprintf("/pad/%d", i))
		if err != nil {
			return nil, fmt.Errorf("padding layer: %w", err)
		}
		layers = append(layers, l)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = runtime.GOARCH
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Entrypoint = []string{WorkloadPath}
	cfg.Config.Cmd = s.cmd
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return img, nil
}

// pushImage builds an image and writes it to the node's registry under
// repo:tag, returning the reference and the image's layer digests.
func (n *Node) pushImage(ctx context.Context, repo string, s imageSpec) (string, []string, error) {
	if s.tag == "" {
		s.tag = "latest"
	}
	if len(s.cmd) == 0 {
		s.cmd = []string{"pause"}
	}
	refStr := n.Registry + "/" + strings.TrimPrefix(repo, "/") + ":" + s.tag
	ref, err := name.ParseReference(refStr, name.Insecure)
	if err != nil {
		return "", nil, fmt.Errorf("push %s: %w", refStr, err)
	}
	img, err := buildImage(s)
	if err != nil {
		return "", nil, fmt.Errorf("push %s: %w", refStr, err)
	}
	// A private transport, closed after the push, leaves no idle
	// connection goroutines behind for leak checkers.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithTransport(tr)); err != nil {
		return "", nil, fmt.Errorf("push %s: %w", refStr, err)
	}
	ls, err := img.Layers()
	if err != nil {
		return "", nil, fmt.Errorf("push %s: %w", refStr, err)
	}
	digests := make([]string, 0, len(ls))
	for _, l := range ls {
		d, err := l.Digest()
		if err != nil {
			return "", nil, fmt.Errorf("push %s: %w", refStr, err)
		}
		digests = append(digests, d.String())
	}
	return refStr, digests, nil
}

// PushImage builds a workload image (the workload program as entrypoint,
// see package workload for its arguments), pushes it to the node's registry
// as repo:tag and returns its reference, e.g. "127.0.0.1:PORT/repo:latest".
// Failures fail the test.
func (n *Node) PushImage(t testing.TB, repo string, opts ...ImageOption) string {
	t.Helper()
	var s imageSpec
	for _, o := range opts {
		o(&s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref, digests, err := n.pushImage(ctx, repo, s)
	if err != nil {
		t.Fatalf("testnode: %v", err)
	}
	n.mu.Lock()
	n.layers[ref] = digests
	n.mu.Unlock()
	return ref
}

// ImageLayers returns the layer digests ("sha256:...") of an image pushed
// by PushImage (or the pause image), in order; nil for unknown references.
func (n *Node) ImageLayers(ref string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.layers[ref]...)
}
