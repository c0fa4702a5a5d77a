package criclient

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

var (
	_ cri.RuntimeService      = CRI{}
	_ cri.ImageManagerService = CRI{}
)

// CRI is a Client as cri-api's RuntimeService and ImageManagerService, for
// code written against the kubelet's interfaces. Those interfaces close with
// Close(ctx), a shape the Client does not take because no context can bound
// its Close: the wait is for refreshes Close has already canceled. So CRI's
// Close ignores ctx and calls Client.Close; every other method is the
// Client's own.
type CRI struct{ *Client }

// CRI returns c as cri-api's RuntimeService and ImageManagerService.
func (c *Client) CRI() CRI { return CRI{c} }

// Close calls Client.Close; ctx is not used.
func (s CRI) Close(context.Context) error { return s.Client.Close() }

// Client is a CRI client: it implements cri-api's RuntimeService and
// ImageManagerService over gRPC, with per-call timeouts, admission control,
// optional List snapshots, an observer and a logger. It is safe for
// concurrent use. Create it with Dial; release it with Close. The zero value
// is not connected: its methods return an *ArgError saying to use Dial.
type Client struct {
	runtime runtimeapi.RuntimeServiceClient
	image   runtimeapi.ImageServiceClient
	conns   []*grpc.ClientConn

	methods  map[string]*method
	gates    [numClasses]gate
	observer func(Event)
	logger   *zap.Logger
	clock    clock.Clock

	sandboxes  *snapshot[*runtimeapi.PodSandbox] // nil when snapshots are off
	containers *snapshot[*runtimeapi.Container]  // nil when snapshots are off

	// life is cancelled by Close; background refreshes run under it.
	life       context.Context
	cancelLife context.CancelFunc
	closed     atomic.Bool
	lifeMu     sync.Mutex
	closing    bool
	background sync.WaitGroup
	closeOnce  sync.Once
	closeErr   error
}

// Dial connects to a CRI runtime at endpoint, "unix:///path/to.sock" or a
// plain path. Unless WithoutVersionCheck is given, it calls Version (bounded
// by ctx and the Version timeout) and fails if the runtime does not answer.
// gRPC connects lazily and reconnects by itself; ctx bounds only Dial.
//
// A bad endpoint or option is a *ConfigError, a nil ctx an *ArgError; a
// runtime that does not answer Version fails with its *CallError.
func Dial(ctx context.Context, endpoint string, opts ...Option) (*Client, error) {
	if ctx == nil {
		return nil, &ArgError{Method: "Dial", Arg: "ctx", Reason: "must not be nil"}
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(cfg)
		}
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	target, err := parseEndpoint("endpoint", endpoint)
	if err != nil {
		return nil, err
	}
	imageTarget := target
	if cfg.imageEndpoint != "" {
		if imageTarget, err = parseEndpoint("WithImageEndpoint", cfg.imageEndpoint); err != nil {
			return nil, err
		}
	}

	c := &Client{
		methods:  make(map[string]*method, len(methodSpecs)),
		observer: cfg.observer,
		logger:   cfg.logger,
		clock:    cfg.clock,
	}
	for name, spec := range methodSpecs {
		m := &method{name: name, class: spec.class, invalidates: spec.invalidates}
		switch spec.timeout {
		case timeoutBase:
			m.timeout = cfg.baseTimeout
		case timeoutDouble:
			m.timeout = 2 * cfg.baseTimeout
		}
		if d, ok := cfg.methodTimeouts[name]; ok {
			m.timeout = d
		}
		c.methods[name] = m
	}
	for class, l := range cfg.limits {
		c.gates[class] = newGate(l, cfg.clock)
	}

	dialOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(cfg.maxMsgSize),
			grpc.MaxCallSendMsgSize(cfg.maxMsgSize),
		),
	}, cfg.dialOptions...)
	conn, err := grpc.NewClient(target, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("criclient: Dial %s: %w", endpoint, err)
	}
	c.conns = append(c.conns, conn)
	c.runtime = runtimeapi.NewRuntimeServiceClient(conn)
	imageConn := conn
	if imageTarget != target {
		if imageConn, err = grpc.NewClient(imageTarget, dialOpts...); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("criclient: Dial image endpoint %s: %w", cfg.imageEndpoint, err)
		}
		c.conns = append(c.conns, imageConn)
	}
	c.image = runtimeapi.NewImageServiceClient(imageConn)
	c.life, c.cancelLife = context.WithCancel(context.Background())

	if cfg.snapshotMaxAge > 0 {
		c.sandboxes = newSnapshot(c, "ListPodSandbox", cfg.snapshotMaxAge,
			func(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
				resp, err := c.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
				return resp.GetItems(), err
			})
		c.containers = newSnapshot(c, "ListContainers", cfg.snapshotMaxAge,
			func(ctx context.Context) ([]*runtimeapi.Container, error) {
				resp, err := c.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
				return resp.GetContainers(), err
			})
	}

	if !cfg.skipVersionDial {
		if _, err := c.Version(ctx, "v1"); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("criclient: Dial %s: %w", endpoint, err)
		}
	}
	c.logger.Debug("connected to CRI runtime", zap.String("endpoint", target), zap.String("imageEndpoint", imageTarget))
	return c, nil
}

// Raw returns the generated gRPC clients on the Client's own connections,
// without its timeouts, admission, snapshots or observer: for a proxy that
// forwards calls as they came. They share the Client's connections, so a
// runtime the Client reaches is reached by them too (two connections to
// one runtime reconnect on their own schedules after a restart), and Close
// closes them. On a Client Dial did not return they are nil.
func (c *Client) Raw() (runtimeapi.RuntimeServiceClient, runtimeapi.ImageServiceClient) {
	if c == nil {
		return nil, nil
	}
	return c.runtime, c.image
}

// parseEndpoint turns "unix:///p" or a plain path into a gRPC target; a
// bad one is a *ConfigError naming option.
func parseEndpoint(option, endpoint string) (string, error) {
	switch {
	case endpoint == "":
		return "", &ConfigError{Option: option, Reason: "is empty"}
	case strings.HasPrefix(endpoint, "unix:"):
		path := strings.TrimPrefix(strings.TrimPrefix(endpoint, "unix:"), "//")
		if !strings.HasPrefix(path, "/") {
			return "", &ConfigError{Option: option, Reason: fmt.Sprintf("%q: want unix:///absolute/path", endpoint)}
		}
		return "unix://" + path, nil
	case strings.Contains(endpoint, "://"):
		return "", &ConfigError{Option: option, Reason: fmt.Sprintf("%q: only unix sockets are supported", endpoint)}
	}
	abs, err := filepath.Abs(endpoint)
	if err != nil {
		return "", &ConfigError{Option: option, Reason: fmt.Sprintf("%q: %v", endpoint, err)}
	}
	return "unix://" + abs, nil
}

// Close signals the background snapshot refreshes to stop, waits for them
// and closes the gRPC connections. A refresh stops promptly: its runtime
// call runs under the client's own context, which Close cancels first.
// Calls made after Close, and calls Close cut short, fail with an error
// matching ErrClosed. Close is idempotent: later calls return the first
// call's result. Close on a Client Dial did not return does nothing.
func (c *Client) Close() error {
	if c == nil {
		return nil
	}
	c.closeOnce.Do(func() {
		if c.cancelLife == nil {
			return
		}
		c.closed.Store(true)
		c.lifeMu.Lock()
		c.closing = true
		c.lifeMu.Unlock()
		c.cancelLife()
		c.background.Wait()
		var errs []error
		for _, conn := range c.conns {
			if err := conn.Close(); err != nil {
				errs = append(errs, fmt.Errorf("criclient: Close: %w", err))
			}
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// track registers a background goroutine; false once Close has begun.
func (c *Client) track() bool {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.closing {
		return false
	}
	c.background.Add(1)
	return true
}
