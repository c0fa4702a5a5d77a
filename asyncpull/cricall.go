package asyncpull

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The image service is a dependency at the CRI boundary: a panic in it (a
// zero-value fake with nil maps, a half-built client) must fail the pull or
// the presence check that called it, never the process from the
// scheduler's goroutine.

// PanicError is the error of an image-service call that panicked.
type PanicError struct {
	Method string // "PullImage" or "ImageStatus"
	Value  any    // what the service panicked with
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("asyncpull: image service %s panicked: %v", e.Method, e.Value)
}

var _ error = (*PanicError)(nil)

func (s *Scheduler) pullImage(ctx context.Context, o *op) (ref string, err error) {
	defer func() {
		if p := recover(); p != nil {
			ref, err = "", &PanicError{Method: "PullImage", Value: p}
		}
	}()
	return s.images.PullImage(ctx, &runtimeapi.ImageSpec{Image: o.key.image}, o.auth, o.sandbox)
}

func (s *Scheduler) imageStatus(ctx context.Context, image string) (resp *runtimeapi.ImageStatusResponse, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, &PanicError{Method: "ImageStatus", Value: p}
		}
	}()
	return s.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
}
