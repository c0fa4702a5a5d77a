package controlplane_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/syncpod/syncpod/internal/controlplane"
)

// client verifies the API server against CAData and sends Token.
func client(t *testing.T, cp *controlplane.ControlPlane) func(method, path string, body any) (int, []byte) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.CAData) {
		t.Fatalf("CAData holds no certificate: %q", cp.CAData)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(hc.CloseIdleConnections)
	return func(method, path string, body any) (int, []byte) {
		t.Helper()
		var r io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			r = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, cp.URL+path, r)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+cp.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
}

// The control plane serves the API with a certificate CAData verifies,
// admits the token as an administrator and no one else, keeps objects in
// etcd across an API server restart, admits a pod without a service
// account, and leaves nothing behind after Close.
func TestRealNodeControlPlane(t *testing.T) {
	cp := controlplane.Start(t)
	do := client(t, cp)
	// The kubelet client CA: what a node trusts the API server's client
	// certificate (--kubelet-client-certificate) by.
	if block, _ := pem.Decode(cp.KubeletClientCAData); block == nil {
		t.Errorf("KubeletClientCAData %q: no PEM", cp.KubeletClientCAData)
	} else if ca, err := x509.ParseCertificate(block.Bytes); err != nil || !ca.IsCA {
		t.Errorf("KubeletClientCAData: %v, a CA: %v", err, err == nil && ca.IsCA)
	}

	if code, body := do(http.MethodGet, "/api/v1/namespaces/default", nil); code != http.StatusOK {
		t.Fatalf("GET namespace default: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, cp.URL+"/api/v1/namespaces", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d, want 401", resp.StatusCode)
	}

	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "kept"}, "data": map[string]string{"k": "v"}}
	if code, body := do(http.MethodPost, "/api/v1/namespaces/default/configmaps", cm); code != http.StatusCreated {
		t.Fatalf("create configmap: %d %s", code, body)
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "web"},
		"spec":     map[string]any{"nodeName": "vnode", "containers": []map[string]any{{"name": "app", "image": "busybox"}}}}
	if code, body := do(http.MethodPost, "/api/v1/namespaces/default/pods", pod); code != http.StatusCreated {
		t.Fatalf("create pod (no service account exists): %d %s", code, body)
	}

	if err := cp.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := cp.Healthy(context.Background()); err != nil {
		t.Fatalf("Healthy after the restart: %v", err)
	}
	code, body := do(http.MethodGet, "/api/v1/namespaces/default/configmaps/kept", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"k":"v"`) {
		t.Fatalf("configmap after the API server restart: %d %s", code, body)
	}
	var got struct {
		Data map[string]string `json:"data"`
	}
	if err := cp.GetJSON(context.Background(), "/api/v1/namespaces/default/configmaps/kept", &got); err != nil || got.Data["k"] != "v" {
		t.Fatalf("GetJSON of the configmap = %v, %v", got, err)
	}
	var se *controlplane.StatusError
	if err := cp.GetJSON(context.Background(), "/api/v1/namespaces/default/configmaps/absent", &got); !errors.As(err, &se) || se.Code != http.StatusNotFound {
		t.Fatalf("GetJSON of an absent configmap = %v, want a *StatusError with code 404", err)
	}
	if !bytes.Contains(cp.Kubeconfig(), []byte(cp.URL)) || !bytes.Contains(cp.Kubeconfig(), []byte(cp.Token)) {
		t.Fatalf("Kubeconfig misses the URL or token:\n%s", cp.Kubeconfig())
	}

	if out, err := cp.Kubectl(context.Background(), "get", "namespace", "default", "-o", "name"); err != nil || strings.TrimSpace(string(out)) != "namespace/default" {
		t.Fatalf("kubectl get namespace default = %q, %v", out, err)
	}
	if kc, err := os.ReadFile(cp.KubeconfigPath); err != nil || !bytes.Equal(kc, cp.Kubeconfig()) {
		t.Fatalf("KubeconfigPath %s holds %q (%v), want Kubeconfig's", cp.KubeconfigPath, kc, err)
	}
	//lint:ignore SA1012 a nil ctx is the misuse under test
	if _, err := cp.Kubectl(nil, "version"); err == nil { //nolint:staticcheck
		t.Fatal("Kubectl with a nil ctx succeeded")
	}

	if err := cp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cp.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(cp.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Dir after Close: %v, want it removed", err)
	}
	if err := cp.RestartAPIServer(); !errors.Is(err, controlplane.ErrClosed) {
		t.Fatalf("RestartAPIServer after Close = %v, want ErrClosed", err)
	}
	if err := cp.GetJSON(context.Background(), "/api/v1/namespaces", &got); !errors.Is(err, controlplane.ErrClosed) {
		t.Fatalf("GetJSON after Close = %v, want ErrClosed", err)
	}
	if _, err := cp.Kubectl(context.Background(), "version"); !errors.Is(err, controlplane.ErrClosed) {
		t.Fatalf("Kubectl after Close = %v, want ErrClosed", err)
	}
}
