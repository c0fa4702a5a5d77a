package shim

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListImages forwards.
func (s *Shim) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return forward(s, ctx, "ListImages", req, s.img.ListImages)
}

// StreamImages forwards the backend's stream.
func (s *Shim) StreamImages(req *runtimeapi.StreamImagesRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	return streamForward(s, ss, req, s.img.StreamImages, nil)
}

// ImageStatus forwards.
func (s *Shim) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	return forward(s, ctx, "ImageStatus", req, s.img.ImageStatus)
}

// PullImage forwards. An error that echoes a credential of the request has
// it replaced by "[REDACTED]".
func (s *Shim) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	resp, err := forward(s, ctx, "PullImage", req, s.img.PullImage)
	if err != nil {
		err = scrubAuth(err, req.GetAuth())
	}
	return resp, err
}

// RemoveImage forwards.
func (s *Shim) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	return forward(s, ctx, "RemoveImage", req, s.img.RemoveImage)
}

// ImageFsInfo forwards.
func (s *Shim) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return forward(s, ctx, "ImageFsInfo", req, s.img.ImageFsInfo)
}

// scrubAuth removes the secrets of auth from err's message, keeping its
// code.
func scrubAuth(err error, auth *runtimeapi.AuthConfig) error {
	if auth == nil {
		return err
	}
	st, _ := status.FromError(err)
	msg := st.Message()
	changed := false
	for _, secret := range []string{auth.GetPassword(), auth.GetAuth(), auth.GetIdentityToken(), auth.GetRegistryToken()} {
		if len(secret) >= 4 && strings.Contains(msg, secret) {
			msg = strings.ReplaceAll(msg, secret, "[REDACTED]")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return status.Error(st.Code(), msg)
}
