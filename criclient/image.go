package criclient

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListImages lists the images matching filter (nil: all).
func (c *Client) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return invoke(c, ctx, "ListImages", none, func(ctx context.Context) ([]*runtimeapi.Image, error) {
		resp, err := c.image.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: filter})
		return resp.GetImages(), err
	})
}

// ImageStatus returns the status of an image; resp.Image is nil when the
// image is not present.
func (c *Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	return invoke(c, ctx, "ImageStatus", callExtra{fields: []zap.Field{zap.String("image", image.GetImage())}},
		func(ctx context.Context) (*runtimeapi.ImageStatusResponse, error) {
			return c.image.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose})
		})
}

// PullImage pulls an image with the given credentials and returns its
// reference. It has no timeout by default: bound it with ctx. The
// credentials never appear in logs or in the returned error, even when the
// runtime echoes them.
func (c *Client) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	secrets := authSecrets(auth)
	x := callExtra{
		fields: []zap.Field{zap.String("image", image.GetImage()), AuthField("auth", auth)},
		scrub:  func(err error) error { return scrubSecrets(err, secrets) },
	}
	return invoke(c, ctx, "PullImage", x, func(ctx context.Context) (string, error) {
		resp, err := c.image.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: podSandboxConfig})
		if err == nil && resp.GetImageRef() == "" {
			err = fmt.Errorf("%w: empty image reference for %q", ErrInvalidResponse, image.GetImage())
		}
		return resp.GetImageRef(), err
	})
}

// RemoveImage removes an image.
func (c *Client) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	return invoke0(c, ctx, "RemoveImage", callExtra{fields: []zap.Field{zap.String("image", image.GetImage())}},
		func(ctx context.Context) error {
			_, err := c.image.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image})
			return err
		})
}

// ImageFsInfo returns information about the filesystems that hold images.
func (c *Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return invoke(c, ctx, "ImageFsInfo", none, func(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
		return c.image.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	})
}
