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
	_ cri.RuntimeService      = (*Client)(nil)
	_ cri.ImageManagerService = (*Client)(nil)
)

// Client is a CRI client: it implements cri-api's RuntimeService and
// ImageManagerService over gRPC, with per-call timeouts, admission control,
// optional List snapshots, an Observer and a logger. It is safe for
// concurrent use. Create it with Dial; release it with Close.
type Client struct {
	runtime runtimeapi.RuntimeServiceClient
	image   runtimeapi.ImageServiceClient
	conns   []*grpc.ClientConn

	methods  map[string]*method
	gates    [numClasses]gate
	observer Observer
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
func Dial(ctx context.Context, endpoint string, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(cfg)
		}
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, fmt.Errorf("criclient: Dial: %w", err)
	}
	target, err := parseEndpoint(endpoint)
	if err != nil {
		return nil, fmt.Errorf("criclient: Dial: %w", err)
	}
	imageTarget := target
	if cfg.imageEndpoint != "" {
		if imageTarget, err = parseEndpoint(cfg.imageEndpoint); err != nil {
			return nil, fmt.Errorf("criclient: Dial: image endpoint: %w", err)
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
			_ = c.Close(context.Background())
			return nil, fmt.Errorf("criclient: Dial %s: %w", endpoint, err)
		}
	}
	c.logger.Debug("connected to CRI runtime", zap.String("endpoint", target), zap.String("imageEndpoint", imageTarget))
	return c, nil
}

// parseEndpoint turns "unix:///p" or a plain path into a gRPC target.
func parseEndpoint(endpoint string) (string, error) {
	switch {
	case endpoint == "":
		return "", fmt.Errorf("%w: empty endpoint", ErrInvalidEndpoint)
	case strings.HasPrefix(endpoint, "unix:"):
		path := strings.TrimPrefix(strings.TrimPrefix(endpoint, "unix:"), "//")
		if !strings.HasPrefix(path, "/") {
			return "", fmt.Errorf("%w: %q: want unix:///absolute/path", ErrInvalidEndpoint, endpoint)
		}
		return "unix://" + path, nil
	case strings.Contains(endpoint, "://"):
		return "", fmt.Errorf("%w: %q: only unix sockets are supported", ErrInvalidEndpoint, endpoint)
	}
	abs, err := filepath.Abs(endpoint)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalidEndpoint, endpoint, err)
	}
	return "unix://" + abs, nil
}

// Close stops background snapshot refreshes, waits for them (or for ctx to
// end) and closes the gRPC connections. Calls made after Close fail with
// ErrClosed. Close is idempotent: later calls return the first call's result.
//
// A nil ctx is treated as context.Background(): Close then waits for the
// refreshes without a bound. Close releases resources, so refusing a nil
// ctx with an error would leave the connections open.
func (c *Client) Close(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.lifeMu.Lock()
		c.closing = true
		c.lifeMu.Unlock()
		c.cancelLife()
		done := make(chan struct{})
		go func() { c.background.Wait(); close(done) }()
		var waitErr error
		select {
		case <-done:
		case <-ctx.Done():
			waitErr = fmt.Errorf("criclient: Close: waiting for snapshot refreshes: %w", ctx.Err())
		}
		errs := []error{waitErr}
		for _, conn := range c.conns {
			if err := conn.Close(); err != nil {
				errs = append(errs, fmt.Errorf("criclient: Close: %w", err))
			}
		}
		if waitErr != nil {
			// Closing the connections ends the refreshes; do not return
			// with the waiter goroutine still running.
			<-done
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
