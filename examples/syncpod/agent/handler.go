package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilexec "k8s.io/utils/exec"
)

// User agents of the agent's HTTP probes and hooks. The "kube-probe/"
// prefix is what applications commonly recognise probes by.
const (
	probeUserAgent     = "kube-probe/syncpod"
	lifecycleUserAgent = "kube-lifecycle/syncpod"
)

// defaultNodeIP is the host probes and hooks reach when neither the
// handler nor Node.IP names one: the agent's pods share the node's
// network namespace, so the pod's IP is the node's and loopback reaches it.
const defaultNodeIP = "127.0.0.1"

// maxProbeBody is how much of an HTTP probe's response body is read and
// kept as its output.
const maxProbeBody = 10 << 10

// maxRedirects is how many redirects an HTTP probe follows.
const maxRedirects = 10

// probeResult is one probe's verdict.
type probeResult uint8

const (
	resultUnknown probeResult = iota // the probe could not be run: no verdict, counted nowhere
	resultSuccess
	resultFailure
)

// handlerTarget is the container a probe or hook acts on.
type handlerTarget struct {
	pod       *corev1.Pod
	container *corev1.Container
	id        string // the runtime's container id
}

// handlerHost is the host a handler reaches when it names none.
func (a *Agent) handlerHost(host string) string {
	if host != "" {
		return host
	}
	if a.cfg.nodeIP != "" {
		return a.cfg.nodeIP
	}
	return defaultNodeIP
}

// resolvePort turns a handler's port (a number, or the name of one of the
// container's ports) into a port number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	port := -1
	if p.Type == intstr.Int {
		port = p.IntValue()
	} else if n, err := strconv.Atoi(p.StrVal); err == nil {
		port = n
	} else {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				port = int(cp.ContainerPort)
				break
			}
		}
		if port < 0 {
			return 0, fmt.Errorf("no port named %q in container %s", p.StrVal, c.Name)
		}
	}
	if port <= 0 || port > 65535 {
		return 0, fmt.Errorf("invalid port number %d", port)
	}
	return port, nil
}

func probeTimeout(p *corev1.Probe) time.Duration {
	if p.TimeoutSeconds > 0 {
		return time.Duration(p.TimeoutSeconds) * time.Second
	}
	return time.Second
}

// runProbe runs probe p against t once: Success or Failure with the
// probe's output, or Unknown with the error that kept it from running (a
// port that does not resolve, a runtime that failed the exec). Failures
// are the kubelet's: an exec that exits non-zero or outlives the timeout,
// an HTTP status outside 200-399 or a request that fails, a TCP connect
// that fails, a gRPC health check that is not SERVING.
func (a *Agent) runProbe(ctx context.Context, t handlerTarget, p *corev1.Probe) (probeResult, string, error) {
	timeout := probeTimeout(p)
	switch h := p.ProbeHandler; {
	case h.Exec != nil:
		return a.execProbe(ctx, t, h.Exec.Command, timeout)
	case h.HTTPGet != nil:
		return a.httpProbe(ctx, t, h.HTTPGet, timeout)
	case h.TCPSocket != nil:
		port, err := resolvePort(h.TCPSocket.Port, t.container)
		if err != nil {
			return resultUnknown, "", err
		}
		addr := net.JoinHostPort(a.handlerHost(h.TCPSocket.Host), strconv.Itoa(port))
		d := net.Dialer{Timeout: timeout}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return resultFailure, err.Error(), nil
		}
		_ = conn.Close()
		return resultSuccess, "", nil
	case h.GRPC != nil:
		return a.grpcProbe(ctx, h.GRPC, timeout)
	}
	return resultUnknown, "", errors.New("the probe has no handler")
}

func (a *Agent) execProbe(ctx context.Context, t handlerTarget, cmd []string, timeout time.Duration) (probeResult, string, error) {
	stdout, stderr, err := a.runtime.execSync(ctx, t.id, cmd, timeout)
	out := string(stdout) + string(stderr)
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return resultSuccess, out, nil
	case errors.As(err, &exit):
		if exit.ExitStatus() == 0 {
			return resultSuccess, out, nil
		}
		return resultFailure, out, nil
	case grpcstatus.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		if ctx.Err() != nil {
			return resultUnknown, "", err // the agent is stopping
		}
		return resultFailure, fmt.Sprintf("command %q timed out after %v", strings.Join(cmd, " "), timeout), nil
	}
	return resultUnknown, "", err
}

// httpTransport is shared by every HTTP probe and hook: no keep-alives (a
// probe is one request), no proxy, certificates not verified (the
// kubelet's choices).
var httpTransport = &http.Transport{
	Proxy:             nil,
	DisableKeepAlives: true,
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
}

// handlerRequest builds the GET of an httpGet action for t.
func (a *Agent) handlerRequest(ctx context.Context, t handlerTarget, g *corev1.HTTPGetAction, userAgent string, defaultPort int) (*http.Request, error) {
	port := defaultPort
	if g.Port.Type == intstr.Int || g.Port.StrVal != "" || defaultPort == 0 {
		p, err := resolvePort(g.Port, t.container)
		if err != nil {
			return nil, err
		}
		port = p
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u, err := url.Parse(g.Path)
	if err != nil || g.Path == "" {
		u = &url.URL{Path: g.Path}
	}
	u.Scheme, u.Host = scheme, net.JoinHostPort(a.handlerHost(g.Host), strconv.Itoa(port))
	if u.Path == "" {
		u.Path = "/"
	} else if !strings.HasPrefix(u.Path, "/") {
		u.Path = "/" + u.Path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "*/*")
	}
	if host := req.Header.Get("Host"); host != "" {
		req.Host = host
	}
	return req, nil
}

// httpProbe GETs the action's URL. A redirect to the same host is
// followed (up to 10); a redirect to another host is not, and its 3xx
// counts as success, with a warning in the output, as the kubelet does.
func (a *Agent) httpProbe(ctx context.Context, t handlerTarget, g *corev1.HTTPGetAction, timeout time.Duration) (probeResult, string, error) {
	req, err := a.handlerRequest(ctx, t, g, probeUserAgent, 0)
	if err != nil {
		return resultUnknown, "", err
	}
	client := &http.Client{Transport: httpTransport, Timeout: timeout,
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if r.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return nil
		}}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return resultUnknown, "", err
		}
		return resultFailure, err.Error(), nil
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resultSuccess, fmt.Sprintf("probe terminated redirects (to %s), response body: %s", resp.Header.Get("Location"), body), nil
	case resp.StatusCode >= 200 && resp.StatusCode < 400:
		return resultSuccess, string(body), nil
	}
	return resultFailure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), nil
}

func (a *Agent) grpcProbe(ctx context.Context, g *corev1.GRPCAction, timeout time.Duration) (probeResult, string, error) {
	addr := net.JoinHostPort(a.handlerHost(""), strconv.Itoa(int(g.Port)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return resultUnknown, "", err
	}
	defer func() { _ = conn.Close() }()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var service string
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{Service: service})
	switch {
	case err != nil && ctx.Err() != nil:
		return resultUnknown, "", err
	case err != nil:
		return resultFailure, fmt.Sprintf("gRPC health check of %s failed: %v", addr, err), nil
	case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
		return resultFailure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus()), nil
	}
	return resultSuccess, "", nil
}

// runHook runs lifecycle handler h for t until it ends or ctx does. An
// exec hook fails when its command fails or exits non-zero (it runs with
// no timeout of its own, as the kubelet's); an httpGet hook fails only
// when the request does (its status code is not looked at, as the
// kubelet's; an HTTPS hook answered in plain HTTP is retried in HTTP); a
// sleep hook waits on the agent's clock.
func (a *Agent) runHook(ctx context.Context, t handlerTarget, h *corev1.LifecycleHandler) error {
	switch {
	case h.Exec != nil:
		_, _, err := a.runtime.execSync(ctx, t.id, h.Exec.Command, 0)
		return err
	case h.HTTPGet != nil:
		req, err := a.handlerRequest(ctx, t, h.HTTPGet, lifecycleUserAgent, 80)
		if err != nil {
			return err
		}
		client := &http.Client{Transport: httpTransport}
		resp, err := client.Do(req)
		if errors.Is(err, http.ErrSchemeMismatch) && req.URL.Scheme == "https" {
			plain := req.Clone(ctx)
			plain.URL.Scheme = "http"
			resp, err = client.Do(plain)
		}
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
		return resp.Body.Close()
	case h.Sleep != nil:
		if h.Sleep.Seconds <= 0 {
			return nil
		}
		timer := a.clock.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer timer.Stop()
		select {
		case <-timer.C():
			return nil
		case <-ctx.Done():
			return errors.New("container terminated before sleep hook finished")
		}
	}
	return errors.New("the hook has no exec, httpGet or sleep action")
}
