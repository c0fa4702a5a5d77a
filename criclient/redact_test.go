package criclient_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestAuthNeverLoggedNorInErrors(t *testing.T) {
	const (
		password      = "pw-Zq81-secret"
		auth          = "YWxpY2U6cHctWnE4MS1zZWNyZXQ="
		identityToken = "idtok-7f3a9c"
		registryToken = "regtok-c0ffee"
	)
	secrets := []string{password, auth, identityToken, registryToken}
	creds := &runtimeapi.AuthConfig{
		Username: "alice", Password: password, Auth: auth,
		ServerAddress: "registry.example", IdentityToken: identityToken, RegistryToken: registryToken,
	}

	srv := startSim(t, crisim.WithRegistryImage("registry.example/app:1", 1<<20))
	core, logs := observer.New(zapcore.DebugLevel)
	c := dial(t, srv, criclient.WithLogger(zap.New(core)))
	ctx := context.Background()
	img := &runtimeapi.ImageSpec{Image: "registry.example/app:1"}

	if _, err := c.PullImage(ctx, img, creds, nil); err != nil {
		t.Fatal(err)
	}
	// A registry or runtime that echoes the credentials in its error.
	srv.Runtime().FailNext("PullImage", 1, status.Error(codes.Unauthenticated,
		fmt.Sprintf("401 for alice:%s (auth %s, identity %s, token %s)", password, auth, identityToken, registryToken)))
	_, err := c.PullImage(ctx, img, creds, nil)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("code = %v (%v), want Unauthenticated", status.Code(err), err)
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q holds secret %q", err, s)
		}
	}
	if !strings.Contains(err.Error(), criclient.Redacted) {
		t.Errorf("error %q was not scrubbed", err)
	}

	pulls := 0
	for _, e := range logs.All() {
		line := fmt.Sprint(e.Message, e.ContextMap())
		for _, s := range secrets {
			if strings.Contains(line, s) {
				t.Errorf("log entry %q holds secret %q", line, s)
			}
		}
		if e.ContextMap()["method"] == "PullImage" {
			pulls++
			if !strings.Contains(line, "alice") || !strings.Contains(line, criclient.Redacted) {
				t.Errorf("PullImage log entry %q lacks the redacted credentials", line)
			}
		}
	}
	if pulls != 2 {
		t.Fatalf("%d PullImage log entries, want 2: the test saw nothing to check", pulls)
	}
	// What the client writes through zap's JSON encoder, too.
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	buf, err := enc.EncodeEntry(zapcore.Entry{Message: "x"}, []zap.Field{criclient.AuthField("auth", creds)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(buf.String(), s) {
			t.Errorf("AuthField encodes secret %q: %s", s, buf)
		}
	}
}
