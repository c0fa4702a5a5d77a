package runtimeview

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrClosed is returned by reads after Close and ends every
	// subscription when the view closes.
	ErrClosed = errors.New("runtimeview: view is closed")

	// ErrOverflow ends a subscription whose buffer was full when an event
	// had to be delivered. The subscriber has lost that event and must
	// resubscribe and relist; no later event is delivered to it, so it can
	// never act on a stream with a silent gap.
	ErrOverflow = errors.New("runtimeview: subscriber buffer overflowed, events lost")

	// ErrUpstreamLost ends every subscription when the runtime's event
	// stream breaks (the runtime restarted or stopped answering): events of
	// the gap are unknown, so subscribers must resubscribe and relist.
	ErrUpstreamLost = errors.New("runtimeview: runtime event stream lost")
)

// StaleError is returned by reads (and Health) when the view cannot prove
// its data is within the staleness bound: the last successful relist
// started longer ago than the bound, or none has succeeded yet. LastErr is
// the error of the last failed relist, if any.
type StaleError struct {
	// Age is how old the data is (time since the last successful relist
	// started); zero when the view never synced.
	Age time.Duration
	// Bound is the configured staleness bound (WithMaxStaleness).
	Bound time.Duration
	// LastErr is why the runtime did not answer the relists, if known.
	LastErr error
}

// Error implements error.
func (e *StaleError) Error() string {
	if e.Age == 0 {
		return fmt.Sprintf("runtimeview: no successful relist yet (bound %v): %v", e.Bound, e.LastErr)
	}
	return fmt.Sprintf("runtimeview: data is %v old, bound %v; last relist error: %v", e.Age.Round(time.Millisecond), e.Bound, e.LastErr)
}

// Unwrap returns LastErr.
func (e *StaleError) Unwrap() error { return e.LastErr }

// GRPCStatus maps a stale view to codes.Unavailable, so a CRI client (the
// kubelet) treats it as a runtime that does not answer.
func (e *StaleError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}
