package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// tokenSource answers TokenRequests on a fake clock, or fails.
type tokenSource struct {
	PodResources
	clock *testclock.FakeClock
	fail  bool
	n     int
}

func (s *tokenSource) ServiceAccountToken(_ context.Context, _, _ string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if s.fail {
		return nil, errors.New("the API server is away")
	}
	s.n++
	out := req.DeepCopy()
	out.Status.Token = "t" + string(rune('0'+s.n))
	out.Status.ExpirationTimestamp = metav1.NewTime(s.clock.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	return out, nil
}

// A token is asked for again once 80% of its life has passed; while a
// new one cannot be had the old one serves until it expires; a token
// for another audience or pod is another token.
func TestTokenRotation(t *testing.T) {
	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	src := &tokenSource{clock: clk}
	tk := newTokens(src, clk)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	proj := &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}
	get := func() string {
		t.Helper()
		tok, err := tk.token(context.Background(), pod, proj)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if got := get(); got != "t1" {
		t.Fatalf("first token %q", got)
	}
	clk.Step(47 * time.Minute)
	if got := get(); got != "t1" {
		t.Errorf("at 47 of 60 minutes: %q, want the cached t1", got)
	}
	clk.Step(2 * time.Minute) // 49 min: past 80%
	if got := get(); got != "t2" {
		t.Errorf("at 49 of 60 minutes: %q, want a new t2", got)
	}
	src.fail = true
	clk.Step(49 * time.Minute)
	if got := get(); got != "t2" {
		t.Errorf("the request failing before t2 expired: %q, want t2", got)
	}
	clk.Step(12 * time.Minute)
	if _, err := tk.token(context.Background(), pod, proj); err == nil {
		t.Error("the request failing after t2 expired gave no error")
	}
	src.fail = false
	if got := get(); got != "t3" {
		t.Errorf("after recovery %q", got)
	}
	other := &corev1.ServiceAccountTokenProjection{Path: "token", Audience: "vault", ExpirationSeconds: ptr.To[int64](3600)}
	if tok, _ := tk.token(context.Background(), pod, other); tok != "t4" {
		t.Errorf("another audience: %q, want its own token", tok)
	}
	tk.forget(types.UID("u1"))
	if got := get(); got != "t5" {
		t.Errorf("after forget: %q, want a new token", got)
	}
}

// A day-long token is rotated after a day at the latest... which 80% of
// a 48-hour token is not: the 24-hour rule comes first.
func TestTokenMaxAge(t *testing.T) {
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](48 * 3600)},
		Status: authenticationv1.TokenRequestStatus{ExpirationTimestamp: metav1.NewTime(issued.Add(48 * time.Hour))}}
	if needsRefresh(tr, issued.Add(23*time.Hour)) || !needsRefresh(tr, issued.Add(24*time.Hour+time.Second)) {
		t.Error("a 48-hour token is not rotated at 24 hours")
	}
}

// The keyring's match: host (globs per label), port, path prefix; the
// most specific entry first; docker.io's aliases are one.
func TestKeyringLookup(t *testing.T) {
	kr := &keyring{}
	for i, k := range []string{"https://index.docker.io/v1/", "reg.example:5000", "reg.example:5000/team", "*.corp.example", "plain.example"} {
		h, p, path := parseRegistry(k)
		kr.entries = append(kr.entries, keyEntry{host: h, port: p, path: path, order: i, auth: &runtimeapi.AuthConfig{ServerAddress: k}})
	}
	sortKeyring(kr)
	for image, want := range map[string]string{
		"busybox":                               "https://index.docker.io/v1/",
		"docker.io/library/nginx:1.27":          "https://index.docker.io/v1/",
		"index.docker.io/library/nginx":         "https://index.docker.io/v1/",
		"reg.example:5000/team/app:1":           "reg.example:5000/team",
		"reg.example:5000/teamster/app":         "reg.example:5000",
		"reg.example:5000/other/app@sha256:abc": "reg.example:5000",
		"reg.example/team/app":                  "",
		"eu.corp.example/app":                   "*.corp.example",
		"a.b.corp.example/app":                  "",
		"plain.example:8443/app":                "",
		"plain.example/app":                     "plain.example",
	} {
		got := ""
		if a := kr.lookup(image); a != nil {
			got = a.ServerAddress
		}
		if got != want {
			t.Errorf("%s: matched %q, want %q", image, got, want)
		}
	}
	var none *keyring
	if none.lookup("busybox") != nil {
		t.Error("a nil keyring matched")
	}
}
