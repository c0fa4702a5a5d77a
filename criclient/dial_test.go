package criclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestDialEndpointForms(t *testing.T) {
	path := startStub(t, "stub")
	for _, ep := range []string{"unix://" + path, "unix:" + path, path} {
		c, err := criclient.Dial(context.Background(), ep)
		if err != nil {
			t.Fatalf("Dial(%q): %v", ep, err)
		}
		v, err := c.Version(context.Background(), "v1")
		if err != nil || v.GetRuntimeName() != "stub" {
			t.Fatalf("Version over %q = %v, %v", ep, v, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDialSeparateImageEndpoint(t *testing.T) {
	rt, img := startStub(t, "rt"), startStub(t, "image-service")
	c, err := criclient.Dial(context.Background(), rt, criclient.WithImageEndpoint("unix://"+img))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fs, err := c.ImageFsInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The stub encodes its name length in the timestamp.
	if got := fs.GetImageFilesystems()[0].GetTimestamp(); got != int64(len("image-service")) {
		t.Fatalf("ImageFsInfo went to the wrong endpoint (timestamp %d)", got)
	}
}

// Raw's clients go over the Client's own connections: the image one to the
// image endpoint, and none of them after Close.
func TestRawSharesConnections(t *testing.T) {
	rt, img := startStub(t, "rt"), startStub(t, "image-service")
	c, err := criclient.Dial(context.Background(), rt, criclient.WithImageEndpoint("unix://"+img))
	if err != nil {
		t.Fatal(err)
	}
	rawRT, rawImg := c.Raw()
	v, err := rawRT.Version(context.Background(), &runtimeapi.VersionRequest{})
	if err != nil || v.GetRuntimeName() != "rt" {
		t.Fatalf("raw Version = %v, %v", v, err)
	}
	fs, err := rawImg.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{})
	if err != nil || fs.GetImageFilesystems()[0].GetTimestamp() != int64(len("image-service")) {
		t.Fatalf("raw ImageFsInfo = %v, %v: want the image endpoint", fs, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rawRT.Version(context.Background(), &runtimeapi.VersionRequest{}); status.Code(err) != codes.Canceled {
		t.Fatalf("raw Version after Close = %v, want Canceled (connection closed)", err)
	}
	var zero *criclient.Client
	if r, i := zero.Raw(); r != nil || i != nil {
		t.Fatal("Raw on a nil Client returned clients")
	}
}

func TestDialRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	for _, ep := range []string{"", "tcp://127.0.0.1:1", "unix://relative.sock"} {
		var ce *criclient.ConfigError
		if _, err := criclient.Dial(ctx, ep); !errors.As(err, &ce) || ce.Option != "endpoint" {
			t.Errorf("Dial(%q) = %v, want a *ConfigError for endpoint", ep, err)
		}
		var ie *criclient.ConfigError
		if _, err := criclient.Dial(ctx, "/x.sock", criclient.WithImageEndpoint(ep)); ep != "" &&
			(!errors.As(err, &ie) || ie.Option != "WithImageEndpoint") {
			t.Errorf("WithImageEndpoint(%q): Dial = %v, want a *ConfigError for WithImageEndpoint", ep, err)
		}
	}
	bad := []criclient.Option{
		criclient.WithTimeout(0),
		criclient.WithMethodTimeout("NoSuchMethod", time.Second),
		criclient.WithMethodTimeout("PullImage", -time.Second),
		criclient.WithAdmission(criclient.ClassRead, criclient.Limits{QPS: -1}),
		criclient.WithAdmission(criclient.Class(42), criclient.Limits{}),
		criclient.WithListSnapshots(-time.Second),
		criclient.WithAdmission(criclient.ClassMutating, criclient.Limits{Burst: -1}),
		criclient.WithAdmission(criclient.ClassImagePull, criclient.Limits{MaxInFlight: -1}),
		criclient.WithTimeout(-time.Second),
		criclient.WithMaxMessageSize(0),
		criclient.WithClock(nil),
	}
	for i, o := range bad {
		var ce *criclient.ConfigError
		if _, err := criclient.Dial(ctx, "/nonexistent.sock", o); !errors.As(err, &ce) || ce.Option == "" || ce.Reason == "" {
			t.Errorf("bad option %d: Dial = %v, want *ConfigError", i, err)
		}
	}
}

func TestDialFailsWhenNobodyListens(t *testing.T) {
	_, err := criclient.Dial(context.Background(), t.TempDir()+"/none.sock")
	if err == nil {
		t.Fatal("Dial to a missing socket succeeded")
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Dial error code = %v (%v), want Unavailable", status.Code(err), err)
	}
	var ce *criclient.CallError
	if !errors.As(err, &ce) || ce.Method != "Version" {
		t.Fatalf("Dial error %v does not carry the Version CallError", err)
	}
}

func TestUnimplementedKeepsCode(t *testing.T) {
	c, err := criclient.Dial(context.Background(), startStub(t, "stub"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.ListContainers(context.Background(), nil)
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("status.Code = %v, want Unimplemented (%v)", status.Code(err), err)
	}
	var ce *criclient.CallError
	if !errors.As(err, &ce) || ce.Method != "ListContainers" {
		t.Fatalf("error %v is not a CallError for ListContainers", err)
	}
	if errors.Is(err, criclient.ErrTimeout) {
		t.Fatal("an Unimplemented error matches ErrTimeout")
	}
}

func TestCloseIdempotent(t *testing.T) {
	c, err := criclient.Dial(context.Background(), startStub(t, "stub"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := c.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	_, err = c.Version(context.Background(), "v1")
	if !errors.Is(err, criclient.ErrClosed) {
		t.Fatalf("Version after Close = %v, want ErrClosed", err)
	}
	if status.Code(err) != codes.Canceled {
		t.Fatalf("status.Code after Close = %v, want Canceled", status.Code(err))
	}
}
