package shim

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient"
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

// PullImage forwards. An error that echoes a credential of the request
// (three characters or more) has it replaced by "[REDACTED]".
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

// minSecretLen is the shortest credential scrubbed from an error message:
// the rule criclient applies to its own errors (it does not export its
// scrubber), so a secret hidden by one is hidden by the other. A minimum
// exists because a one- or two-character "secret" is ordinary text: every
// occurrence in the message would be replaced, garbling the error while
// hiding next to nothing.
const minSecretLen = 3

// scrubAuth replaces every secret of auth in err's message with
// criclient.Redacted, keeping its gRPC code. Longer secrets go first, so
// a secret that contains another is replaced whole.
func scrubAuth(err error, auth *runtimeapi.AuthConfig) error {
	if auth == nil {
		return err
	}
	var secrets []string
	for _, secret := range []string{auth.GetPassword(), auth.GetAuth(), auth.GetIdentityToken(), auth.GetRegistryToken()} {
		if len(secret) >= minSecretLen {
			secrets = append(secrets, secret)
		}
	}
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	st, _ := status.FromError(err)
	msg := st.Message()
	changed := false
	for _, secret := range secrets {
		if strings.Contains(msg, secret) {
			msg = strings.ReplaceAll(msg, secret, criclient.Redacted)
			changed = true
		}
	}
	if !changed {
		return err
	}
	return status.Error(st.Code(), msg)
}
