package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// GetJSON reads path ("/api/v1/nodes/n1") from the API server as the admin
// user and decodes the JSON answer into out (a *corev1.Node, a
// map[string]any, ...). An answer other than 200 OK is a *StatusError, so a
// test tells an absent object (Code 404) from a failing server. It is
// meant for tests that check what an operator would see (a Node's
// conditions, a Lease) without importing client-go.
func (cp *ControlPlane) GetJSON(ctx context.Context, path string, out any) error {
	if cp == nil || cp.apiBin == "" {
		return errZero
	}
	if ctx == nil || !strings.HasPrefix(path, "/") || out == nil {
		return fmt.Errorf("controlplane: GetJSON needs a ctx, a path starting with / and a non-nil out (got path %q)", path)
	}
	cp.mu.Lock()
	closed := cp.closed
	cp.mu.Unlock()
	if closed {
		return ErrClosed
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+path, nil)
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+cp.Token)
	req.Header.Set("Accept", "application/json")
	resp, err := cp.verified.Do(req)
	if err != nil {
		return fmt.Errorf("controlplane: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &StatusError{Path: path, Code: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("controlplane: GET %s: decode: %w", path, err)
	}
	return nil
}
