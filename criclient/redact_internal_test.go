package criclient

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRedactAuth(t *testing.T) {
	a := &runtimeapi.AuthConfig{Username: "bob", Password: "pw-secret", Auth: "YXV0aA==", ServerAddress: "reg", IdentityToken: "id-tok", RegistryToken: "reg-tok"}
	r := RedactAuth(a)
	s := r.String()
	for _, secret := range []string{"pw-secret", "YXV0aA==", "id-tok", "reg-tok"} {
		if strings.Contains(s, secret) {
			t.Errorf("redacted %q still holds %q", s, secret)
		}
	}
	if r.Username != "bob" || r.ServerAddress != "reg" || r.Password != Redacted {
		t.Errorf("RedactAuth = %v", r)
	}
	if a.Password != "pw-secret" {
		t.Error("RedactAuth modified its argument")
	}
	if RedactAuth(nil) != nil {
		t.Error("RedactAuth(nil) != nil")
	}
	if got := RedactAuth(&runtimeapi.AuthConfig{Username: "u"}); got.Password != "" {
		t.Error("an empty secret became non-empty")
	}
}

func TestScrubSecretsKeepsCode(t *testing.T) {
	err := status.Error(codes.Unauthenticated, "registry said: bad password pw-secret for bob")
	got := scrubSecrets(err, []string{"pw-secret"})
	if status.Code(got) != codes.Unauthenticated {
		t.Fatalf("code = %v", status.Code(got))
	}
	if strings.Contains(got.Error(), "pw-secret") || !strings.Contains(got.Error(), Redacted) {
		t.Fatalf("scrubbed = %q", got)
	}
	if scrubSecrets(err, nil) != err {
		t.Fatal("scrub with no secrets changed the error")
	}
}
