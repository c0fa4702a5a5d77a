package crisim_test

import (
	"errors"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient/crisim"
)

// FuzzStart feeds Start every numeric option value a caller can pass (image
// sizes, latencies of each shape, buffer sizes, bounds, bandwidth, cores,
// seed): it never panics, refuses a bad value with a *ConfigError naming an
// option and returns no Server, and a Server it starts answers Version,
// shows the image with its size and closes. The latency goes on PullImage,
// which is not called, so a fake clock that never moves cannot block the
// iteration.
func FuzzStart(f *testing.F) {
	f.Add(int64(0), uint8(0), int64(0), int64(0), 0, 0, 0, int64(0), 0, int64(0), int64(1))
	f.Add(int64(2<<20), uint8(1), int64(time.Millisecond), int64(time.Second), 100, 8, 3, int64(100<<20), 2, int64(80*time.Millisecond), int64(42))
	f.Add(int64(-1), uint8(2), int64(-1), int64(-1), -1, -1, -1, int64(-1), -1, int64(-1), int64(-1))
	f.Add(int64(1<<63-1), uint8(2), int64(1<<63-1), int64(1<<63-1), 1<<30, 1<<62, 1<<62, int64(1<<63-1), 1<<30, int64(1<<63-1), int64(-1<<63))
	f.Fuzz(func(t *testing.T, size int64, kind uint8, d1, d2 int64, buffer, concurrency, downloads int, bandwidth int64, cores int, work, seed int64) {
		var l crisim.Latency
		switch kind % 3 {
		case 0:
			l = crisim.Fixed(time.Duration(d1))
		case 1:
			l = crisim.Uniform(time.Duration(d1), time.Duration(d2))
		default:
			l = crisim.LogNormal(time.Duration(d1), time.Duration(d2))
		}
		opts := []crisim.Option{
			crisim.WithClock(testclock.NewFakeClock(time.Unix(1_000_000, 0))),
			crisim.WithSeed(seed),
			crisim.WithImage("busybox:1.36", size),
			crisim.WithRegistryImage("nginx:1.27", size),
			crisim.WithLatency("PullImage", l),
			crisim.WithEventBuffer(buffer),
			crisim.WithMaxConcurrency(concurrency),
			crisim.WithMaxConcurrentDownloads(downloads),
			crisim.WithPullBandwidth(bandwidth),
		}
		if cores != 0 {
			opts = append(opts, crisim.WithCPU(cores, map[string]time.Duration{"StartContainer": time.Duration(work)}))
		}
		srv, err := crisim.Start(opts...)
		if err != nil {
			var ce *crisim.ConfigError
			if srv != nil || !errors.As(err, &ce) || ce.Option == "" || ce.Reason == "" {
				t.Fatalf("Start = %v, %T %v; want no Server and a *ConfigError naming an option", srv, err, err)
			}
			return
		}
		if size < 0 || d1 < 0 || (kind%3 != 0 && d2 < 0) || buffer < 0 || concurrency < 0 || downloads < 0 || bandwidth < 0 || cores < 0 || (cores > 0 && work < 0) {
			t.Errorf("Start accepted a negative value (size %d, d1 %d, buffer %d, concurrency %d, downloads %d, bandwidth %d, cores %d, work %d)",
				size, d1, buffer, concurrency, downloads, bandwidth, cores, work)
		}
		ctx := ctxT(t)
		rt := srv.Runtime()
		if _, err := rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
			t.Errorf("Version = %v", err)
		}
		img, err := rt.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}})
		if err != nil || img.GetImage() == nil || img.GetImage().GetSize() != uint64(size) {
			t.Errorf("ImageStatus = %v, %v; want busybox of size %d", img, err, size)
		}
		if err := srv.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
}
