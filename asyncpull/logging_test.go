package asyncpull_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/asyncpull"
)

func TestCredentialsNeverLogged(t *testing.T) {
	secrets := []string{"s3cr3t-user", "hunter2-password", "YXV0aC1ibG9i", "id-token-xyz", "reg-token-xyz"}
	auth := &runtimeapi.AuthConfig{Username: secrets[0], Password: secrets[1], Auth: secrets[2],
		IdentityToken: secrets[3], RegistryToken: secrets[4], ServerAddress: "registry.example"}
	core, logs := observer.New(zapcore.DebugLevel)
	rec := &eventRecorder{}
	imgs := newTestImages(false)
	imgs.setFail("registry.example/private:v1", status.Error(codes.Unauthenticated, "unauthorized"))
	s := newScheduler(imgs, asyncpull.WithLogger(zap.New(core)), asyncpull.WithObserver(rec.observe), asyncpull.WithQPS(0, 0))
	defer s.Close()
	ctx := context.Background()
	var out []string
	for _, image := range []string{"registry.example/private:v1", "registry.example/ok:v1", "Bad Name"} {
		for _, pol := range []asyncpull.PullPolicy{asyncpull.PullIfNotPresent, asyncpull.PullAlways} {
			req := asyncpull.Request{Image: image, Auth: auth, PodUID: "p", PullPolicy: pol}
			res, err := s.Wait(ctx, req)
			out = append(out, fmt.Sprintf("%v %+v %#v %s", res, res, req, req), fmt.Sprint(err))
			res = s.Ensure(ctx, req) // back-off path
			out = append(out, fmt.Sprint(res.Err))
			js, jerr := json.Marshal(req)
			if jerr != nil {
				t.Fatal(jerr)
			}
			out = append(out, string(js))
			zap.New(core).Info("request", zap.Any("req", req), zap.Object("obj", req))
		}
	}
	if logs.Len() == 0 {
		t.Fatal("nothing logged: the test would prove nothing")
	}
	for _, e := range logs.All() {
		b, err := json.Marshal(e.ContextMap())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e.Message, string(b))
	}
	for _, e := range rec.all() {
		out = append(out, fmt.Sprintf("%+v", e))
	}
	all := strings.Join(out, "\n")
	for _, sec := range secrets {
		if strings.Contains(all, sec) {
			t.Fatalf("credential %q leaked:\n%s", sec, all)
		}
	}
	if !strings.Contains(all, "REDACTED") {
		t.Fatal("requests not printed at all")
	}
}
