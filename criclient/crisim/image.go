package crisim

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type image struct {
	id   string // "sha256:<64 hex>"
	name string // normalised name without tag, for the repo digest
	tags []string
	size int64
}

func (i *image) repoDigest() string {
	if i.name == "" {
		return i.id
	}
	return i.name + "@" + i.id
}

func (i *image) api() *runtimeapi.Image {
	img := &runtimeapi.Image{
		Id:       i.id,
		RepoTags: slices.Clone(i.tags),
		Size:     uint64(max(i.size, 0)),
		Spec:     &runtimeapi.ImageSpec{Image: i.id},
	}
	if i.name != "" {
		img.RepoDigests = []string{i.repoDigest()}
	}
	return img
}

// imageStore holds the node's images and the simulated registry. Guarded by
// Runtime.mu.
type imageStore struct {
	byID     map[string]*image
	byRef    map[string]string    // normalised ref -> id
	registry map[string]int64     // normalised ref -> size
	auth     map[string][2]string // normalised ref -> the credentials its pull needs
	pulls    map[string]int64     // normalised ref -> downloads done
}

func newImageStore(cfg *config) *imageStore {
	s := &imageStore{
		byID:     map[string]*image{},
		byRef:    map[string]string{},
		registry: map[string]int64{},
		auth:     map[string][2]string{},
		pulls:    map[string]int64{},
	}
	for ref, cred := range cfg.registryAuth {
		s.auth[normalizeRef(ref)] = cred
	}
	for ref, size := range cfg.registry {
		s.registry[normalizeRef(ref)] = size
	}
	for ref, size := range cfg.images {
		s.addLocked(normalizeRef(ref), size)
	}
	return s
}

// normalizeRef returns the kubelet's normalised form of ref
// ("busybox" -> "docker.io/library/busybox:latest"). A ref that does not
// parse is returned unchanged.
func normalizeRef(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ref
	}
	return reference.TagNameOnly(named).String()
}

func imageID(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (s *imageStore) addLocked(ref string, size int64) *image {
	if id, ok := s.byRef[ref]; ok {
		return s.byID[id]
	}
	img := &image{id: imageID(ref), size: size}
	if named, err := reference.ParseNormalizedNamed(ref); err == nil {
		img.name = named.Name()
		if _, isDigest := named.(reference.Digested); !isDigest {
			img.tags = []string{ref}
		}
	}
	s.byID[img.id] = img
	s.byRef[ref] = img.id
	return img
}

// lookupLocked finds a present image by reference, full id, or id without
// the "sha256:" prefix.
func (s *imageStore) lookupLocked(ref string) *image {
	if ref == "" {
		return nil
	}
	if img := s.byID[ref]; img != nil {
		return img
	}
	if img := s.byID["sha256:"+ref]; img != nil {
		return img
	}
	if id, ok := s.byRef[normalizeRef(ref)]; ok {
		return s.byID[id]
	}
	return nil
}

func (s *imageStore) removeLocked(img *image) {
	delete(s.byID, img.id)
	for ref, id := range s.byRef {
		if id == img.id {
			delete(s.byRef, ref)
		}
	}
}

// AddRegistryImage makes ref pullable with the given size (see
// WithRegistryImage). It may be called at any time. An empty ref or a
// negative size is an *ArgError and changes nothing.
func (r *Runtime) AddRegistryImage(ref string, size int64) error {
	if err := r.checkImage("AddRegistryImage", ref, size); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.images.registry[normalizeRef(ref)] = size
	return nil
}

// AddImage makes ref present on the node (and pullable), as WithImage. An
// empty ref or a negative size is an *ArgError and changes nothing.
func (r *Runtime) AddImage(ref string, size int64) error {
	if err := r.checkImage("AddImage", ref, size); err != nil {
		return err
	}
	n := normalizeRef(ref)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.images.registry[n] = size
	r.images.addLocked(n, size)
	return nil
}

func (r *Runtime) checkImage(method, ref string, size int64) error {
	if !r.ready() {
		return errNotNew(method)
	}
	if arg, reason := imageProblem(ref, size); arg != "" {
		return &ArgError{Method: method, Arg: arg, Reason: reason}
	}
	return nil
}

// imageProblem names the argument of an image reference and size that
// cannot be used, and says why; it returns "" if both can be.
func imageProblem(ref string, size int64) (arg, reason string) {
	switch {
	case ref == "":
		return "ref", "must not be empty"
	case size < 0:
		return "size", fmt.Sprintf("%d is negative (image %q)", size, ref)
	}
	return "", ""
}

// Downloads returns how many times ref was actually downloaded (pulls of a
// present image do not download).
func (r *Runtime) Downloads(ref string) int64 {
	if !r.ready() {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.images.pulls[normalizeRef(ref)]
}

// PullImage makes a registry image present. If it is already present the
// call costs only its latency; otherwise it downloads for size/bandwidth
// (WithPullBandwidth), at most WithMaxConcurrentDownloads at a time, without
// holding a concurrency slot. Concurrent pulls of one absent image download
// it separately (as two kubelet pull requests would ask for it twice). A
// reference the registry does not hold gives codes.NotFound; one that
// needs credentials (WithRegistryAuth) and lacks them gives
// codes.Unauthenticated. Credentials in the request are only compared,
// never printed.
func (r *Runtime) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	const method = "PullImage"
	a, err := r.admit(ctx, method, kindRead)
	if err != nil {
		return nil, err
	}
	defer a.leave()
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, errInvalid(method, "image is empty")
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return nil, errInvalid(method, "image reference %q: %v", ref, err)
	}
	n := normalizeRef(ref)
	r.mu.RLock()
	img := r.images.lookupLocked(n)
	size, inRegistry := r.images.registry[n]
	cred, needsAuth := r.images.auth[n]
	r.mu.RUnlock()
	if img != nil {
		return &runtimeapi.PullImageResponse{ImageRef: img.id}, nil
	}
	if !inRegistry {
		return nil, errNotFound(method, "failed to pull and unpack image %q: failed to resolve reference %q: not found", n, n)
	}
	if needsAuth && !authorized(req.GetAuth(), cred) {
		return nil, newError(method, ErrUnauthenticated, codes.Unauthenticated,
			"failed to pull and unpack image %q: failed to resolve reference %q: pull access denied: 401 Unauthorized", n, n)
	}

	a.releaseSlots()
	if r.downloads != nil {
		if err := r.downloads.Acquire(ctx, 1); err != nil {
			return nil, contextError(method, err)
		}
		defer r.downloads.Release(1)
	}
	if bw := r.cfg.bandwidth; bw > 0 && size > 0 {
		d := time.Duration(float64(size) / float64(bw) * float64(time.Second))
		if err := r.sleep(ctx, method, d); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed() {
		return nil, errClosed(method)
	}
	r.images.pulls[n]++
	img = r.images.addLocked(n, size)
	return &runtimeapi.PullImageResponse{ImageRef: img.id}, nil
}

// ImageStatus returns the image, or a nil image if it is not present (as the
// CRI specifies; not an error).
func (r *Runtime) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	const method = "ImageStatus"
	return serve(ctx, r, method, kindRead, func() (*runtimeapi.ImageStatusResponse, error) {
		ref := req.GetImage().GetImage()
		if ref == "" {
			return nil, errInvalid(method, "image is empty")
		}
		r.mu.RLock()
		defer r.mu.RUnlock()
		if img := r.images.lookupLocked(ref); img != nil {
			return &runtimeapi.ImageStatusResponse{Image: img.api()}, nil
		}
		return &runtimeapi.ImageStatusResponse{}, nil
	})
}

// ListImages lists present images, optionally only the one the filter
// names, sorted by id.
func (r *Runtime) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	const method = "ListImages"
	return serve(ctx, r, method, kindRead, func() (*runtimeapi.ListImagesResponse, error) {
		want := req.GetFilter().GetImage().GetImage()
		r.mu.RLock()
		defer r.mu.RUnlock()
		out := []*runtimeapi.Image{}
		if want != "" {
			if img := r.images.lookupLocked(want); img != nil {
				out = append(out, img.api())
			}
			return &runtimeapi.ListImagesResponse{Images: out}, nil
		}
		for _, img := range r.images.byID {
			out = append(out, img.api())
		}
		slices.SortFunc(out, func(a, b *runtimeapi.Image) int { return strings.Compare(a.Id, b.Id) })
		return &runtimeapi.ListImagesResponse{Images: out}, nil
	})
}

// RemoveImage removes an image (all its tags). Removing an absent image
// succeeds, as the CRI requires.
func (r *Runtime) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	const method = "RemoveImage"
	return serve(ctx, r, method, kindRead, func() (*runtimeapi.RemoveImageResponse, error) {
		ref := req.GetImage().GetImage()
		if ref == "" {
			return nil, errInvalid(method, "image is empty")
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if img := r.images.lookupLocked(ref); img != nil {
			r.images.removeLocked(img)
		}
		return &runtimeapi.RemoveImageResponse{}, nil
	})
}

// ImageFsInfo reports one image filesystem whose used bytes are the sum of
// the present images' sizes.
func (r *Runtime) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	const method = "ImageFsInfo"
	return serve(ctx, r, method, kindRead, func() (*runtimeapi.ImageFsInfoResponse, error) {
		now := r.clock.Now()
		r.mu.RLock()
		var used, n uint64
		for _, img := range r.images.byID {
			used += uint64(max(img.size, 0))
			n++
		}
		r.mu.RUnlock()
		fs := &runtimeapi.FilesystemUsage{
			Timestamp:  now.UnixNano(),
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/crisim/images"},
			UsedBytes:  &runtimeapi.UInt64Value{Value: used},
			InodesUsed: &runtimeapi.UInt64Value{Value: n},
		}
		return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{fs}}, nil
	})
}

// authorized reports whether a carries the credentials cred.
func authorized(a *runtimeapi.AuthConfig, cred [2]string) bool {
	if a == nil {
		return false
	}
	if a.GetUsername() == cred[0] && a.GetPassword() == cred[1] {
		return true
	}
	return a.GetAuth() != "" && a.GetAuth() == base64.StdEncoding.EncodeToString([]byte(cred[0]+":"+cred[1]))
}
