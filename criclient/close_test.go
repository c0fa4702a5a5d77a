package criclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
)

// Close(nil) closes like Close(context.Background()): no panic, and the
// client is closed afterwards, background snapshot refreshes included.
func TestCloseNilContext(t *testing.T) {
	srv := startSim(t)
	c, err := criclient.Dial(context.Background(), srv.Endpoint(), criclient.WithListSnapshots(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListPodSandbox(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	//nolint:staticcheck // a nil context is the input under test
	if err := c.Close(nil); err != nil {
		t.Fatalf("Close(nil) = %v, want nil", err)
	}
	if _, err := c.Version(context.Background(), "v1"); !errors.Is(err, criclient.ErrClosed) {
		t.Fatalf("Version after Close(nil) = %v, want ErrClosed", err)
	}
	//nolint:staticcheck // a nil context is the input under test
	if err := c.Close(nil); err != nil {
		t.Fatalf("second Close(nil) = %v, want nil", err)
	}
}
