package criclient

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// GetContainerEvents opens the runtime's container event stream, calls
// connectionEstablishedCallback (if not nil) once the stream is open, and
// sends every event into containerEventsCh until the stream fails or ctx
// ends. It always returns a non-nil *CallError: wrapping io.EOF when the
// runtime closed the stream, the gRPC status error when it broke, or
// ctx.Err(). A blocked send into containerEventsCh also ends on ctx. The
// stream is not subject to admission control and has no timeout.
func (c *Client) GetContainerEvents(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	const name = "GetContainerEvents"
	if err := c.check(ctx, name); err != nil {
		return err
	}
	if containerEventsCh == nil {
		return &CallError{Method: name, Err: errors.New("nil event channel")}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return &CallError{Method: name, Err: err}
	}
	c.logger.Debug("container event stream open")
	if connectionEstablishedCallback != nil {
		connectionEstablishedCallback(stream)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w (%v)", ctxErr, err)
			}
			if c.closed.Load() && ctx.Err() == nil {
				err = fmt.Errorf("%w: %v", ErrClosed, err)
			}
			c.logger.Debug("container event stream ended", zap.Error(err))
			return &CallError{Method: name, Err: err}
		}
		select {
		case containerEventsCh <- ev:
		case <-ctx.Done():
			return &CallError{Method: name, Err: ctx.Err()}
		}
	}
}
