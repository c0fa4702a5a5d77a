package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/examples/crishim/shim"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "crishim:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("crishim", flag.ContinueOnError)
	listen := fs.String("listen", "unix:///run/syncpod/crishim.sock", "CRI endpoint to serve (unix socket, created 0660)")
	backend := fs.String("runtime-endpoint", "unix:///run/containerd/containerd.sock", "CRI endpoint of the runtime")
	health := fs.String("health-listen", "", "address for the /healthz HTTP endpoint (host:port on loopback, or empty for none)")
	var cfg shim.Config
	limitFlags(fs, "read", &cfg.Limits[shim.ClassRead])
	limitFlags(fs, "mutating", &cfg.Limits[shim.ClassMutating])
	limitFlags(fs, "pull", &cfg.Limits[shim.ClassImagePull])
	fs.BoolVar(&cfg.PassthroughLists, "passthrough-lists", false, "send ListPodSandbox/ListContainers to the runtime instead of answering from the view")
	fs.DurationVar(&cfg.RelistPeriod, "relist-period", time.Second, "how often the view relists the runtime")
	fs.DurationVar(&cfg.MaxStaleness, "max-staleness", 10*time.Second, "a runtime that answers no relist for this long is reported down (Status, /healthz); reads go on from the last view")
	fs.BoolVar(&cfg.FailStaleReads, "fail-stale-reads", false, "past --max-staleness, fail Lists and status reads with UNAVAILABLE instead")
	fs.IntVar(&cfg.EventBuffer, "event-buffer", 1000, "events buffered per GetContainerEvents subscriber before it is cut off")
	async := fs.String("async", "", "comma-separated methods to run asynchronously (supported: RunPodSandbox)")
	fs.IntVar(&cfg.AsyncWorkers, "async-workers", 8, "asynchronous RunPodSandbox calls run at once")
	fs.IntVar(&cfg.AsyncQueue, "async-queue", 256, "accepted asynchronous calls waiting to run")
	drain := fs.Duration("drain-timeout", 30*time.Second, "how long SIGTERM waits for calls in flight")
	debug := fs.Bool("debug", false, "log every call (method, latency, code; never requests)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, m := range strings.Split(*async, ",") {
		switch strings.TrimSpace(m) {
		case "":
		case "RunPodSandbox":
			cfg.AsyncRunPodSandbox = true
		default:
			return fmt.Errorf("--async %q: only RunPodSandbox is supported", m)
		}
	}
	logCfg := zap.NewProductionConfig()
	if *debug {
		logCfg.Level.SetLevel(zap.DebugLevel)
	}
	logger, err := logCfg.Build()
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()
	cfg.Logger = logger

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := shim.New(ctx, *backend, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	var hs *healthServer
	if *health != "" {
		if hs, err = startHealth(*health, s.HealthHandler()); err != nil {
			return fmt.Errorf("--health-listen: %w", err)
		}
		defer hs.stop()
	}
	l, err := shim.Listen(*listen)
	if err != nil {
		return err
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(criclient.DefaultMaxMessageSize), grpc.MaxSendMsgSize(criclient.DefaultMaxMessageSize))
	s.Register(srv)
	logger.Info("serving", zap.String("listen", *listen), zap.String("runtime", *backend), zap.Bool("asyncRunPodSandbox", cfg.AsyncRunPodSandbox))
	return serve(ctx, srv, l, hs, s.Drain, *drain, logger)
}

// serve runs srv on l until Serve fails or ctx ends; then it drains (up to
// drainTimeout) and stops srv. On every path it returns only after the
// gRPC and health servers have stopped and their goroutines returned.
func serve(ctx context.Context, srv *grpc.Server, l net.Listener, hs *healthServer, drain func(context.Context) error, drainTimeout time.Duration, logger *zap.Logger) error {
	defer hs.stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	select {
	case err := <-served:
		srv.Stop() // close the connections Serve accepted
		if err == nil {
			return nil
		}
		return fmt.Errorf("serving CRI: %w", err)
	case <-ctx.Done():
	}
	logger.Info("draining")
	dctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	drainErr := drain(dctx)
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-dctx.Done():
		srv.Stop()
		<-stopped
	}
	hs.stop()
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return drainErr
}

func limitFlags(fs *flag.FlagSet, name string, l *shim.Limits) {
	fs.Float64Var(&l.QPS, name+"-qps", 0, "token bucket rate of "+name+" calls (0: unlimited)")
	fs.IntVar(&l.Burst, name+"-burst", 0, "token bucket size of "+name+" calls")
	fs.IntVar(&l.MaxInFlight, name+"-inflight", 0, "max "+name+" calls at the runtime at once (0: unbounded)")
}
