package crisim_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/crisim"
)

func TestImages(t *testing.T) {
	n := startNode(t, crisim.WithImage("docker.io/library/pause:3.10", 700), crisim.WithRegistryImage("nginx:1.27", 5000))
	ctx := ctxT(t)
	st, err := n.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}})
	if err != nil || st.Image != nil {
		t.Fatalf("ImageStatus(absent) = %v, %v; want nil image, nil error", st, err)
	}
	_, err = n.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nosuch:1"}})
	wantCode(t, err, codes.NotFound)
	pulled, err := n.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err = n.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "docker.io/library/nginx:1.27"}})
	if err != nil || st.Image == nil || st.Image.Id != pulled.ImageRef || st.Image.Size != 5000 {
		t.Fatalf("ImageStatus(pulled) = %v, %v", st, err)
	}
	// Pulling a present image does not download it again.
	if _, err := n.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}}); err != nil {
		t.Fatal(err)
	}
	if got := n.rt.Downloads("nginx:1.27"); got != 1 {
		t.Fatalf("Downloads = %d, want 1", got)
	}
	list, err := n.is.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(list.Images) != 2 {
		t.Fatalf("ListImages = %v, %v", list, err)
	}
	fs, err := n.is.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil || fs.ImageFilesystems[0].UsedBytes.Value != 5700 {
		t.Fatalf("ImageFsInfo = %v, %v", fs, err)
	}
	if _, err := n.is.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: pulled.ImageRef}}); err != nil {
		t.Fatal(err)
	}
	st, _ = n.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}})
	if st.GetImage() != nil {
		t.Fatalf("image still present after RemoveImage")
	}
	_, err = n.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "bad ref!"}})
	wantCode(t, err, codes.InvalidArgument)
}

// Pull time is size/bandwidth on the runtime clock, and at most
// WithMaxConcurrentDownloads downloads run at once.
func TestPullBandwidthAndDownloadCap(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	rt := newRuntime(t,
		crisim.WithClock(clk),
		crisim.WithPullBandwidth(1000), // 1000 B/s
		crisim.WithMaxConcurrentDownloads(2),
		crisim.WithRegistryImage("a:1", 10_000), // 10 s each
		crisim.WithRegistryImage("b:1", 10_000),
		crisim.WithRegistryImage("c:1", 10_000),
	)
	defer rt.Close()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, ref := range []string{"a:1", "b:1", "c:1"} {
		wg.Go(func() {
			_, err := rt.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			errs <- err
		})
	}
	present := func() int {
		n := 0
		for _, ref := range []string{"a:1", "b:1", "c:1"} {
			if rt.Downloads(ref) > 0 {
				n++
			}
		}
		return n
	}
	// Two downloads wait on the clock; the third waits for a download slot.
	waitFor(t, "2 downloads in progress", func() bool { return rt.InFlight("PullImage") == 3 && clk.Waiters() == 2 })
	clk.Step(9 * time.Second)
	if got := present(); got != 0 {
		t.Fatalf("after 9s: %d images present, want 0", got)
	}
	clk.Step(time.Second)
	waitFor(t, "first two pulls done, third downloading", func() bool { return present() == 2 && clk.Waiters() == 1 })
	clk.Step(10 * time.Second)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := present(); got != 3 {
		t.Fatalf("%d images present, want 3", got)
	}
	if got := rt.MaxInFlight("PullImage"); got != 3 {
		t.Fatalf("MaxInFlight(PullImage) = %d, want 3", got)
	}
	_, err := rt.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "zzz:1"}})
	if !errors.Is(err, crisim.ErrNotFound) {
		t.Fatalf("in-process PullImage(unknown) = %v, want ErrNotFound", err)
	}
}

func TestPullErrorsNeverShowCredentials(t *testing.T) {
	n := startNode(t)
	_, err := n.is.PullImage(ctxT(t), &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: "private.example/app:1"},
		Auth:  &runtimeapi.AuthConfig{Username: "bob", Password: "hunter2", Auth: "Ym9iOmh1bnRlcjI=", IdentityToken: "tok-secret"},
	})
	wantCode(t, err, codes.NotFound)
	for _, secret := range []string{"hunter2", "Ym9iOmh1bnRlcjI=", "tok-secret"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error %q shows a credential", err)
		}
	}
}

func TestRegistryAuth(t *testing.T) {
	r := newRuntime(t, crisim.WithRegistryImage("reg.example:5000/team/app:1", 0),
		crisim.WithRegistryAuth("reg.example:5000/team/app:1", "alice", "s3cret"))
	ctx := context.Background()
	spec := &runtimeapi.ImageSpec{Image: "reg.example:5000/team/app:1"}
	for name, auth := range map[string]*runtimeapi.AuthConfig{
		"none":           nil,
		"wrong password": {Username: "alice", Password: "nope"},
	} {
		_, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec, Auth: auth})
		if status.Code(err) != codes.Unauthenticated || !errors.Is(err, crisim.ErrUnauthenticated) {
			t.Errorf("%s: PullImage = %v, want Unauthenticated", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "nope") {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}
	if _, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec,
		Auth: &runtimeapi.AuthConfig{Auth: base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))}}); err != nil {
		t.Fatalf("PullImage with auth: %v", err)
	}
	if _, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec,
		Auth: &runtimeapi.AuthConfig{Username: "alice", Password: "s3cret"}}); err != nil {
		t.Fatalf("PullImage with username and password: %v", err)
	}
}
