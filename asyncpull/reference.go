package asyncpull

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/distribution/reference"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// normalized is a parsed image reference.
type normalized struct {
	image    string // fully qualified, with the default tag: "docker.io/library/nginx:latest"
	registry string // reference.Domain: "docker.io"
}

// normalize parses ref the way containerd and the kubelet do (distribution/reference) and adds
// the default tag.
func normalize(ref string) (normalized, error) {
	if ref == "" || strings.TrimSpace(ref) != ref {
		return normalized{}, &RequestError{Field: "Image", Value: ref, Err: ErrInvalidImageName}
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return normalized{}, &RequestError{Field: "Image", Value: ref, Err: errors.Join(ErrInvalidImageName, err)}
	}
	named = reference.TagNameOnly(named)
	return normalized{image: named.String(), registry: reference.Domain(named)}, nil
}

func isAnonymous(a *runtimeapi.AuthConfig) bool {
	return a == nil || (a.Username == "" && a.Password == "" && a.Auth == "" &&
		a.IdentityToken == "" && a.RegistryToken == "")
}

// credentialKey is a keyed hash (HMAC-SHA256 with a per-scheduler random key) of the
// credentials, "" for anonymous pulls. It identifies credentials without revealing them: the
// key never leaves the process, so even a weak password cannot be brute-forced from a log line.
func credentialKey(secret []byte, a *runtimeapi.AuthConfig) string {
	if isAnonymous(a) {
		return ""
	}
	m := hmac.New(sha256.New, secret)
	for _, f := range []string{a.Username, a.Password, a.Auth, a.ServerAddress, a.IdentityToken, a.RegistryToken} {
		m.Write([]byte(f))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil)[:8])
}
