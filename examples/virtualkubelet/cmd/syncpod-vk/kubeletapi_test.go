package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/virtualkubelet/provider"
)

// testCA is a CA that signs client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client is a TLS client certificate for user, signed by ca.
func (ca *testCA) client(t *testing.T, user string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: user},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// The kubelet API's authentication and authorization, with the API server
// faked: no credentials, an unknown token and a certificate of another CA
// are 401; a token the TokenReview accepts and a certificate of the
// client CA are authorized by a SubjectAccessReview on the node's
// subresource (403 when it denies); the node's routes answer.
func TestKubeletAPIAuth(t *testing.T) {
	// A fake API server answering TokenReviews and SubjectAccessReviews
	// (the webhook clients need a real REST client, not a fake clientset).
	var mu sync.Mutex
	var reviews []authzv1.SubjectAccessReviewSpec
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var out any
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authnv1.TokenReview
			if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			switch tr.Spec.Token {
			case "alice-token":
				tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "alice"}}
			case "bob-token":
				tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "bob"}}
			}
			out = &tr
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authzv1.SubjectAccessReview
			if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			reviews = append(reviews, sar.Spec)
			mu.Unlock()
			sar.Status.Allowed = sar.Spec.User == "alice" || sar.Spec.User == "carol"
			out = &sar
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(out)
	}))
	defer apiserver.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: apiserver.URL})
	if err != nil {
		t.Fatal(err)
	}

	srv, err := crisim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	ctx := context.Background()
	cri, err := criclient.Dial(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cri.Close() }()
	prov, err := provider.New(ctx, cri.CRI(), cri.CRI(), provider.WithNodeName("vk-auth"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = prov.Close() }()

	ca, other := newTestCA(t), newTestCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	o := apiOptions{listen: "127.0.0.1:0", clientCAFile: caFile}
	k, err := listenKubeletAPI(o)
	if err != nil {
		t.Fatal(err)
	}
	defer k.stop()
	pods := corev1listers.NewPodLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	if err := startKubeletAPI(k, o, kube, "vk-auth", "192.0.2.1", prov, pods, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	base := "https://" + k.ln.Addr().String()

	get := func(path, token string, cert *tls.Certificate) (int, []byte) {
		t.Helper()
		tc := &tls.Config{InsecureSkipVerify: true} // the node's self-signed certificate
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		var b []byte
		buf := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(buf)
			b = append(b, buf[:n]...)
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b
	}

	carol, mallory := ca.client(t, "carol"), other.client(t, "carol")
	for _, c := range []struct {
		what, path, token string
		cert              *tls.Certificate
		want              int
	}{
		{"no credentials", "/pods", "", nil, http.StatusUnauthorized},
		{"an unknown token", "/stats/summary", "nobody-token", nil, http.StatusUnauthorized},
		{"a certificate of another CA", "/pods", "", &mallory, http.StatusUnauthorized},
		{"a user the review denies", "/pods", "bob-token", nil, http.StatusForbidden},
		{"an authorized token", "/pods", "alice-token", nil, http.StatusOK},
		{"an authorized certificate", "/stats/summary", "", &carol, http.StatusOK},
		{"an authorized token, metrics", "/metrics/resource", "alice-token", nil, http.StatusOK},
	} {
		if code, body := get(c.path, c.token, c.cert); code != c.want {
			t.Errorf("GET %s with %s: %d %s, want %d", c.path, c.what, code, body, c.want)
		}
	}
	code, body := get("/stats/summary", "alice-token", nil)
	var sum statsv1alpha1.Summary
	if err := json.Unmarshal(body, &sum); code != http.StatusOK || err != nil || sum.Node.NodeName != "vk-auth" {
		t.Errorf("/stats/summary: %d %v %+v", code, err, sum.Node)
	}

	mu.Lock()
	defer mu.Unlock()
	subresources := map[string]bool{}
	for _, r := range reviews {
		ra := r.ResourceAttributes
		if ra == nil || ra.Verb != "get" || ra.Resource != "nodes" || ra.Name != "vk-auth" {
			t.Errorf("SubjectAccessReview %+v, want get on nodes/vk-auth", r)
			continue
		}
		subresources[ra.Subresource] = true
	}
	for _, s := range []string{"proxy", "stats", "metrics"} {
		if !subresources[s] {
			t.Errorf("no SubjectAccessReview for nodes/%s (reviews %+v)", s, reviews)
		}
	}
}

// A serving certificate given without its key, or an unreadable client
// CA, fails the API's start.
func TestKubeletAPIBadFiles(t *testing.T) {
	if _, err := serverTLS(apiOptions{certFile: "/nonexistent.crt", keyFile: "/nonexistent.key"}, "n", ""); err == nil {
		t.Error("serverTLS with missing files: nil error")
	}
	if _, err := kubeletAuth(fake.NewClientset(), "n", []byte("not a PEM")); err == nil {
		t.Error("kubeletAuth with a bad client CA: nil error")
	}
	cfg, err := serverTLS(apiOptions{}, "n", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("192.0.2.1"); err != nil {
		t.Errorf("self-signed certificate: %v", err)
	}
	if cfg.ClientAuth != tls.RequestClientCert {
		t.Errorf("ClientAuth %v, want RequestClientCert (tokens work without a certificate)", cfg.ClientAuth)
	}
}
