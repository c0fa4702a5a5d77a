package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Exec, attach and port-forward go through the runtime's CRI streaming
// server, as the kubelet's do: the provider asks the runtime for the
// stream's URL (Exec, Attach, PortForward) and streams to it with
// client-go's SPDY clients. virtual-kubelet has already terminated the API
// server's stream (SPDY or WebSocket) and hands the provider its stdin,
// stdout, stderr, terminal sizes or port stream, so the provider is a
// client of the runtime's server rather than a proxy of the connection.

// RunInContainer runs cmd in the pod's container (kubectl exec) through
// the runtime's CRI streaming server, with the streams and terminal of
// attach; terminal resizes are passed on. A command that exits non-zero
// returns an error carrying its exit code (an ExitError of
// k8s.io/client-go/util/exec, which virtual-kubelet reports to the
// client as the exit code).
func (p *Provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	if ctx == nil || attach == nil {
		return errdefs.InvalidInput("RunInContainer: ctx and attach must not be nil")
	}
	if len(cmd) == 0 {
		return errdefs.InvalidInput("RunInContainer: no command")
	}
	if err := p.open(); err != nil {
		return err
	}
	id, err := p.containerID(ctx, namespace, podName, containerName, false)
	if err != nil {
		return err
	}
	resp, err := p.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Tty: attach.TTY(),
		Stdin: attach.Stdin() != nil, Stdout: attach.Stdout() != nil, Stderr: attach.Stderr() != nil})
	if err != nil {
		return fmt.Errorf("exec in %s/%s/%s: %w", namespace, podName, containerName, err)
	}
	return streamTo(ctx, resp.GetUrl(), attach)
}

// AttachToContainer attaches to the main process of the pod's container
// (kubectl attach) through the runtime's CRI streaming server; terminal
// resizes are passed on.
func (p *Provider) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	if ctx == nil || attach == nil {
		return errdefs.InvalidInput("AttachToContainer: ctx and attach must not be nil")
	}
	if err := p.open(); err != nil {
		return err
	}
	id, err := p.containerID(ctx, namespace, podName, containerName, false)
	if err != nil {
		return err
	}
	resp, err := p.rt.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id, Tty: attach.TTY(),
		Stdin: attach.Stdin() != nil, Stdout: attach.Stdout() != nil, Stderr: attach.Stderr() != nil})
	if err != nil {
		return fmt.Errorf("attach to %s/%s/%s: %w", namespace, podName, containerName, err)
	}
	return streamTo(ctx, resp.GetUrl(), attach)
}

// PortForward forwards stream to port of the pod's network namespace
// (kubectl port-forward; localhost of the node for a hostNetwork pod)
// through the runtime's CRI streaming server. It returns when either side
// closes its end.
func (p *Provider) PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	if ctx == nil || stream == nil {
		return errdefs.InvalidInput("PortForward: ctx and stream must not be nil")
	}
	if err := p.open(); err != nil {
		return err
	}
	sandbox, err := p.sandboxID(ctx, namespace, podName)
	if err != nil {
		return err
	}
	resp, err := p.rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sandbox, Port: []int32{port}})
	if err != nil {
		return fmt.Errorf("port-forward to %s/%s: %w", namespace, podName, err)
	}
	return forwardTo(ctx, resp.GetUrl(), port, stream)
}

// sandboxID is the ID of the pod's ready sandbox.
func (p *Provider) sandboxID(ctx context.Context, namespace, podName string) (string, error) {
	pod, err := p.GetPod(ctx, namespace, podName)
	if err != nil {
		return "", err
	}
	list, err := p.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pod.UID)}})
	if err != nil {
		return "", fmt.Errorf("sandbox of %s/%s: %w", namespace, podName, err)
	}
	if len(list) == 0 {
		return "", errdefs.NotFoundf("pod %s/%s has no ready sandbox", namespace, podName)
	}
	newest := list[0]
	for _, sb := range list[1:] {
		if sb.GetCreatedAt() > newest.GetCreatedAt() {
			newest = sb
		}
	}
	return newest.GetId(), nil
}

// streamConfig is the client config for a CRI streaming URL: the runtime
// serves it on its own address, over TLS with a certificate of its own
// (not verified, as the kubelet's proxy does not) or plain HTTP.
var streamConfig = &rest.Config{TLSClientConfig: rest.TLSClientConfig{Insecure: true}}

// streamTo runs an exec or attach stream at the runtime's URL with
// attach's streams.
func streamTo(ctx context.Context, rawURL string, attach api.AttachIO) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("runtime streaming URL %q: %w", rawURL, err)
	}
	exec, err := remotecommand.NewSPDYExecutor(streamConfig, http.MethodPost, u)
	if err != nil {
		return fmt.Errorf("runtime streaming URL %q: %w", rawURL, err)
	}
	opts := remotecommand.StreamOptions{Tty: attach.TTY()}
	// Only streams that are there: a nil WriteCloser must stay a nil Writer.
	if in := attach.Stdin(); in != nil {
		opts.Stdin = in
	}
	if out := attach.Stdout(); out != nil {
		opts.Stdout = out
	}
	if e := attach.Stderr(); e != nil && !attach.TTY() {
		opts.Stderr = e
	}
	if attach.TTY() && attach.Resize() != nil {
		opts.TerminalSizeQueue = &sizeQueue{ctx: ctx, sizes: attach.Resize()}
	}
	// An ExitError (the command's non-zero exit) is returned as it is:
	// virtual-kubelet finds the exit code by a type assertion.
	return exec.StreamWithContext(ctx, opts)
}

// sizeQueue passes virtual-kubelet's terminal sizes to client-go.
type sizeQueue struct {
	ctx   context.Context
	sizes <-chan api.TermSize
}

// Next returns the next terminal size, nil once the stream ends.
func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s, ok := <-q.sizes:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: s.Width, Height: s.Height}
	case <-q.ctx.Done():
		return nil
	}
}

// forwardTo copies stream to and from port through a port-forward connection
// at the runtime's URL: one SPDY connection with the protocol's error and
// data streams, as client-go's port forwarder opens them for each
// connection.
func forwardTo(ctx context.Context, rawURL string, port int32, stream io.ReadWriteCloser) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("runtime streaming URL %q: %w", rawURL, err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(streamConfig)
	if err != nil {
		return err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return fmt.Errorf("port-forward connection to %s: %w", u.Host, err)
	}
	defer func() { _ = conn.Close() }()

	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("port-forward error stream: %w", err)
	}
	_ = errStream.Close() // the client writes nothing on it
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("port-forward data stream: %w", err)
	}

	var wg sync.WaitGroup
	var remoteErr error
	wg.Go(func() {
		msg, err := io.ReadAll(errStream)
		switch {
		case err != nil && !errors.Is(err, io.EOF):
			remoteErr = fmt.Errorf("port-forward error stream: %w", err)
		case len(msg) > 0:
			remoteErr = fmt.Errorf("port-forward to port %d: %s", port, msg)
		}
	})
	remoteDone, localErr := make(chan struct{}), make(chan struct{})
	wg.Go(func() { // the pod's answers to the client
		_, _ = io.Copy(stream, data)
		close(remoteDone)
	})
	wg.Go(func() { // the client's bytes to the pod
		_, err := io.Copy(data, stream)
		_ = data.Close() // half-close: the pod sees EOF and may still answer
		if err != nil {
			close(localErr)
		}
	})
	select {
	case <-remoteDone:
	case <-localErr:
	case <-ctx.Done():
	}
	// As client-go's forwarder: the connection ends when the pod's side is
	// done or the client's fails; closing the connection and the stream
	// unblocks the other copy and the error stream's reader.
	_ = conn.Close()
	_ = stream.Close()
	wg.Wait()
	return remoteErr
}
