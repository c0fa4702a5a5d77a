package kubelethost

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// get fetches url with a connection of its own (no keep-alive, so no idle
// connection goroutines outlive the call).
func get(ctx context.Context, url string) (int, string, error) {
	tr := &http.Transport{
		DisableKeepAlives: true,
		// The secure port serves a self-signed certificate the kubelet
		// made for itself on 127.0.0.1.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, test only
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// ping asks the healthz port, which answers as soon as the kubelet runs.
func (k *Kubelet) ping(ctx context.Context) error {
	code, body, err := get(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort))
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("healthz port: %d %s", code, strings.TrimSpace(body))
	}
	return nil
}

// Healthz asks the kubelet's /healthz on its read-only port, which also
// checks that its sync loop runs: the loop stops syncing pods when the
// runtime is unhealthy (PLEG not relisting, runtime not ready), and healthz
// then fails. It returns nil for "ok" and otherwise an error holding the
// kubelet's verbose answer; ErrClosed after Close.
func (k *Kubelet) Healthz(ctx context.Context) error {
	if ctx == nil {
		return &ArgError{Method: "Healthz", Arg: "ctx", Reason: "must not be nil"}
	}
	if err := k.usable(); err != nil {
		return err
	}
	if done, _ := k.Exited(); done {
		return errNotRunning
	}
	code, body, err := get(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz?verbose", k.ReadOnlyPort))
	if err != nil {
		return fmt.Errorf("kubelethost: healthz: %w", err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("kubelethost: healthz: %d:\n%s", code, strings.TrimSpace(body))
	}
	return nil
}

// Metrics returns the kubelet's /metrics page (Prometheus text format),
// read from its secure port.
func (k *Kubelet) Metrics(ctx context.Context) (string, error) {
	if ctx == nil {
		return "", &ArgError{Method: "Metrics", Arg: "ctx", Reason: "must not be nil"}
	}
	if err := k.usable(); err != nil {
		return "", err
	}
	code, body, err := get(ctx, fmt.Sprintf("https://127.0.0.1:%d/metrics", k.Port))
	if err != nil {
		return "", fmt.Errorf("kubelethost: metrics: %w", err)
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("kubelethost: metrics: %d %s", code, strings.TrimSpace(body))
	}
	return body, nil
}

// Configz returns the kubelet's /configz page (JSON: {"kubeletconfig":
// {...}}), the configuration it runs with after its defaults were applied,
// read from its secure port.
func (k *Kubelet) Configz(ctx context.Context) (string, error) {
	if ctx == nil {
		return "", &ArgError{Method: "Configz", Arg: "ctx", Reason: "must not be nil"}
	}
	if err := k.usable(); err != nil {
		return "", err
	}
	code, body, err := get(ctx, fmt.Sprintf("https://127.0.0.1:%d/configz", k.Port))
	if err != nil {
		return "", fmt.Errorf("kubelethost: configz: %w", err)
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("kubelethost: configz: %d %s", code, strings.TrimSpace(body))
	}
	return body, nil
}
