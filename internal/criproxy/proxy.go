package criproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
)

// Proxy forwards every gRPC call from its socket to a backend and counts
// the calls per full method name. Create it with Start; Close stops it.
type Proxy struct {
	ln      net.Listener
	srv     *grpc.Server
	backend *grpc.ClientConn
	path    string
	served  chan struct{}

	mu     sync.Mutex
	counts map[string]int

	closeOnce sync.Once
	closeErr  error
}

// Start listens on the unix socket path and forwards to backend, a gRPC
// target such as "unix:///run/containerd/containerd.sock".
func Start(path, backend string) (*Proxy, error) {
	if path == "" || backend == "" {
		return nil, errors.New("criproxy: Start: socket path and backend are required")
	}
	conn, err := grpc.NewClient(backend, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return nil, fmt.Errorf("criproxy: Start: backend %s: %w", backend, err)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("criproxy: Start: %w", err)
	}
	p := &Proxy{ln: ln, backend: conn, path: path, counts: map[string]int{}, served: make(chan struct{})}
	p.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(p.forward))
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// Endpoint is the proxy's gRPC target, "unix://PATH".
func (p *Proxy) Endpoint() string { return "unix://" + p.path }

// Counts returns the calls seen so far per full method name
// ("/runtime.v1.RuntimeService/ListPodSandbox").
func (p *Proxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Total is the number of calls seen so far, streams counted once each.
func (p *Proxy) Total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, v := range p.counts {
		n += v
	}
	return n
}

// Close stops accepting calls, ends the ones in flight and waits for the
// server to stop. It is idempotent.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.srv.Stop()
		<-p.served
		p.closeErr = p.backend.Close()
		_ = os.Remove(p.path)
	})
	return p.closeErr
}

// forward relays one call, unary or streaming, frame by frame.
func (p *Proxy) forward(_ any, in grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(in)
	if !ok {
		return errors.New("criproxy: no method in stream")
	}
	p.mu.Lock()
	p.counts[method]++
	p.mu.Unlock()

	ctx, cancel := context.WithCancel(in.Context())
	defer cancel()
	out, err := p.backend.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	// Client to backend: CRI calls send one request and half-close, so
	// this ends at once; a cancelled client ends it through ctx.
	go func() {
		for {
			f := new(frame)
			if err := in.RecvMsg(f); err != nil {
				_ = out.CloseSend()
				return
			}
			if err := out.SendMsg(f); err != nil {
				return
			}
		}
	}()
	headerSent := false
	for {
		f := new(frame)
		if err := out.RecvMsg(f); err != nil {
			in.SetTrailer(out.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if !headerSent {
			if md, err := out.Header(); err == nil {
				_ = in.SendHeader(md)
			}
			headerSent = true
		}
		if err := in.SendMsg(f); err != nil {
			return err
		}
	}
}

// frame is one message's bytes, forwarded without decoding.
type frame struct{ b []byte }

// rawCodec moves frames as they are on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("criproxy: cannot marshal %T", v)
	}
	return f.b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("criproxy: cannot unmarshal into %T", v)
	}
	f.b = append(f.b[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

var _ encoding.Codec = rawCodec{}
