package shim

import (
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/runtimeview"
)

// GetContainerEvents serves a subscription of the view's one upstream
// event stream. Each caller has its own buffer (Config.EventBuffer); a
// caller whose buffer overflows gets codes.ResourceExhausted and one whose
// upstream broke codes.Unavailable, so it knows it lost events and relists.
// Neither the runtime nor other callers wait for a slow one.
func (s *Shim) GetContainerEvents(req *runtimeapi.GetEventsRequest, ss grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	if s.draining() {
		return status.Error(codes.Unavailable, ErrDraining.Error())
	}
	sub, err := s.view.Subscribe(ss.Context(), s.cfg.EventBuffer)
	if err != nil {
		// Canceled or DeadlineExceeded when the caller gave up, else
		// Unavailable (the view is closed).
		return viewError(err)
	}
	defer sub.Close()
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return subscriptionError(sub.Err())
			}
			if ev = s.abandoned.filterEvent(ev); ev == nil {
				continue
			}
			if s.async != nil {
				ev = s.async.editEvent(ev)
			}
			if err := ss.Send(ev); err != nil {
				return err
			}
		case <-ss.Context().Done():
			return status.FromContextError(ss.Context().Err()).Err()
		case <-s.drain:
			return status.Error(codes.Unavailable, ErrDraining.Error())
		}
	}
}

func subscriptionError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, runtimeview.ErrOverflow):
		return status.Error(codes.ResourceExhausted, err.Error())
	default:
		return status.Error(codes.Unavailable, err.Error())
	}
}
