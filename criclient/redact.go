package criclient

import (
	"errors"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Redacted replaces every secret in a redacted AuthConfig or error message.
const Redacted = "[REDACTED]"

// RedactAuth returns a copy of auth with Password, Auth, IdentityToken and
// RegistryToken replaced by Redacted when set; Username and ServerAddress
// are kept. It returns nil for nil. Use it before printing an AuthConfig:
// its generated String method prints the secrets.
func RedactAuth(auth *runtimeapi.AuthConfig) *runtimeapi.AuthConfig {
	if auth == nil {
		return nil
	}
	hide := func(s string) string {
		if s == "" {
			return ""
		}
		return Redacted
	}
	return &runtimeapi.AuthConfig{
		Username:      auth.GetUsername(),
		Password:      hide(auth.GetPassword()),
		Auth:          hide(auth.GetAuth()),
		ServerAddress: auth.GetServerAddress(),
		IdentityToken: hide(auth.GetIdentityToken()),
		RegistryToken: hide(auth.GetRegistryToken()),
	}
}

// AuthField is a zap field that logs auth with its secrets redacted.
func AuthField(key string, auth *runtimeapi.AuthConfig) zap.Field {
	return zap.Object(key, redactedAuth{RedactAuth(auth)})
}

// redactedAuth logs an already redacted AuthConfig field by field. It must
// implement zapcore.ObjectMarshaler: otherwise zap.Object would not compile,
// and zap.Any would fall back to the generated String, which prints secrets.
type redactedAuth struct{ a *runtimeapi.AuthConfig }

var _ zapcore.ObjectMarshaler = redactedAuth{}

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (r redactedAuth) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if r.a == nil {
		return nil
	}
	enc.AddString("username", r.a.Username)
	enc.AddString("serverAddress", r.a.ServerAddress)
	enc.AddString("password", r.a.Password)
	enc.AddString("auth", r.a.Auth)
	enc.AddString("identityToken", r.a.IdentityToken)
	enc.AddString("registryToken", r.a.RegistryToken)
	return nil
}

// authSecrets lists the secret values of auth worth scrubbing.
func authSecrets(auth *runtimeapi.AuthConfig) []string {
	var out []string
	for _, s := range []string{auth.GetPassword(), auth.GetAuth(), auth.GetIdentityToken(), auth.GetRegistryToken()} {
		if len(s) >= 3 { // shorter strings would scrub random text
			out = append(out, s)
		}
	}
	return out
}

// scrubSecrets returns err with every secret replaced by Redacted in its
// message, keeping its gRPC code. A runtime or registry that echoes the
// credentials in an error must not leak them through the client.
func scrubSecrets(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	leaked := false
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			leaked = true
			break
		}
	}
	if !leaked {
		return err
	}
	scrub := func(s string) string {
		for _, secret := range secrets {
			s = strings.ReplaceAll(s, secret, Redacted)
		}
		return s
	}
	if st, ok := status.FromError(err); ok {
		return status.Error(st.Code(), scrub(st.Message()))
	}
	return errors.New(scrub(msg))
}
