package testnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// loopbackRegistry is an in-memory OCI registry on 127.0.0.1 that counts
// the requests it serves, so tests can prove what a runtime fetched.
type loopbackRegistry struct {
	addr   string
	server *http.Server
	done   chan struct{}  // closed when Serve returns
	extra  sync.WaitGroup // Serve calls on listeners added by serveAlso

	mu     sync.Mutex
	counts map[string]int // "METHOD /v2/..." -> requests
}

func startRegistry() (*loopbackRegistry, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("registry: listen: %w", err)
	}
	r := &loopbackRegistry{
		addr:   l.Addr().String(),
		done:   make(chan struct{}),
		counts: make(map[string]int),
	}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.server = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			r.mu.Lock()
			r.counts[req.Method+" "+req.URL.Path]++
			r.mu.Unlock()
			inner.ServeHTTP(w, req)
		}),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(r.done)
		_ = r.server.Serve(l)
	}()
	return r, nil
}

// close stops the server, drops its connections and waits for it.
func (r *loopbackRegistry) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := r.server.Shutdown(ctx)
	if err != nil {
		err = r.server.Close()
	}
	<-r.done
	r.extra.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// snapshot copies the request counts.
func (r *loopbackRegistry) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out
}

func (r *loopbackRegistry) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.counts)
}

// fetches sums the GET requests for one kind of object ("blobs" or
// "manifests"), keyed by what the key function makes of repository and
// reference.
func (r *loopbackRegistry) fetches(kind string, key func(repo, ref string) string) map[string]int {
	out := make(map[string]int)
	for k, n := range r.snapshot() {
		method, path, _ := strings.Cut(k, " ")
		if method != http.MethodGet {
			continue
		}
		repo, ref, ok := splitV2Path(path, kind)
		if !ok {
			continue
		}
		out[key(repo, ref)] += n
	}
	return out
}

// splitV2Path splits "/v2/<repo>/<kind>/<ref>" into repo and ref.
func splitV2Path(path, kind string) (repo, ref string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/"+kind+"/")
	if i <= 0 {
		return "", "", false
	}
	repo, ref = rest[:i], rest[i+len(kind)+2:]
	if ref == "" || strings.Contains(ref, "/") {
		return "", "", false
	}
	return repo, ref, true
}

// serveAlso serves the registry on one more listener (inside a pod network
// namespace); close stops it too.
func (r *loopbackRegistry) serveAlso(l net.Listener) {
	r.extra.Add(1)
	go func() {
		defer r.extra.Done()
		_ = r.server.Serve(l)
	}()
}
