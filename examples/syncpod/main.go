package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/manifest"
	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

const defaultDemoTimeout = time.Minute

type options struct {
	manifests   string
	endpoint    string
	mode        string
	json        bool
	logLevel    string
	metricsAddr string
	cleanup     bool
	cleanupWait time.Duration
	timeout     time.Duration
	untilUp     bool
	podDir      string
	podDirSet   bool // --pod-dir given: used even on the embedded runtime
}

// defaultCleanupWait bounds the retries of --cleanup: long enough for a
// loaded containerd to stop 50 pods whose calls time out now and then.
const defaultCleanupWait = 5 * time.Minute

// defaultPodDir is where the command keeps its pods' directories
// (volumes, termination-message files), as the kubelet keeps
// /var/lib/kubelet/pods.
const defaultPodDir = "/var/lib/syncpod/pods"

func main() {
	var o options
	fs := flag.NewFlagSet("syncpod", flag.ExitOnError)
	fs.StringVar(&o.manifests, "manifests", "", "directory of pod manifests to run and watch (empty: a demo burst)")
	fs.StringVar(&o.endpoint, "runtime-endpoint", "", "CRI endpoint, e.g. unix:///run/containerd/containerd.sock (empty: an embedded simulated runtime)")
	fs.StringVar(&o.mode, "mode", "syncpod", "syncpod, or baseline (today's kubelet behaviour, for comparison)")
	fs.BoolVar(&o.json, "json", false, "print the summary as JSON")
	fs.StringVar(&o.logLevel, "log-level", "warn", "debug, info, warn or error (logs go to stderr)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address, e.g. :9090")
	fs.BoolVar(&o.cleanup, "cleanup", false, "remove the pods this agent made on exit (always done on the embedded runtime)")
	fs.DurationVar(&o.cleanupWait, "cleanup-timeout", defaultCleanupWait, "with --cleanup: keep retrying the removal this long, then name the pods left and exit non-zero")
	fs.DurationVar(&o.timeout, "demo-timeout", defaultDemoTimeout, "demo: give up waiting for the pods after this long")
	fs.BoolVar(&o.untilUp, "exit-when-running", false, "with --manifests: exit once every pod is running (for scripts)")
	fs.StringVar(&o.podDir, "pod-dir", defaultPodDir, "directory of the pods' volumes and termination-message files (the embedded runtime uses a temporary one unless this is given)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: syncpod [flags]\n\nRuns pods on a CRI runtime with syncpod's building blocks.\n"+
			"With no flags it runs a demo burst on an embedded simulated runtime.\n\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	fs.Visit(func(f *flag.Flag) { o.podDirSet = o.podDirSet || f.Name == "pod-dir" })
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "syncpod:", err)
		os.Exit(1)
	}
}

func newLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	cfg := zap.NewDevelopmentConfig()
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.OutputPaths = []string{"stderr"}
	cfg.DisableStacktrace = true
	return cfg.Build()
}

func run(ctx context.Context, o options, out io.Writer) error {
	var mode agent.Mode
	if err := mode.Set(o.mode); err != nil {
		return fmt.Errorf("--mode: %w", err)
	}
	log, err := newLogger(o.logLevel)
	if err != nil {
		return err
	}
	if o.endpoint != "" && o.manifests == "" {
		return errors.New("--runtime-endpoint needs --manifests: the demo burst runs on the embedded simulated runtime")
	}
	defer func() { _ = log.Sync() }()

	var pods []*corev1.Pod
	var onPod func(*corev1.Pod) // the embedded runtime learns each manifest's images
	endpoint := o.endpoint
	embedded := endpoint == ""
	if embedded {
		rtCfg, demo := scenario.Demo()
		if o.manifests != "" {
			rtCfg.Images = nil // manifests name their own images: make any reference pullable
		}
		srv, err := crisim.Start(rtCfg.Options()...)
		if err != nil {
			return fmt.Errorf("start simulated runtime: %w", err)
		}
		defer srv.Close()
		endpoint = srv.Endpoint()
		if o.manifests != "" {
			rt := srv.Runtime()
			onPod = func(p *corev1.Pod) {
				for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
					rt.AddRegistryImage(c.Image, 20e6)
				}
				// A simulated init container has no program to finish:
				// unless the manifest scripts it, it runs for half a second.
				for _, c := range p.Spec.InitContainers {
					key := crisim.AnnotationExitAfter + "." + c.Name
					if _, set := p.Annotations[key]; !set && (c.RestartPolicy == nil) {
						if p.Annotations == nil {
							p.Annotations = map[string]string{}
						}
						p.Annotations[key] = "500ms"
					}
				}
			}
		} else {
			pods = demo
		}
		o.cleanup = true
		if !o.podDirSet { // simulated pods keep their volumes in a scratch directory
			tmp, err := os.MkdirTemp("", "syncpod-pods-")
			if err != nil {
				return fmt.Errorf("pod directory: %w", err)
			}
			defer os.RemoveAll(tmp)
			o.podDir = tmp
		}
	}
	client, err := criclient.Dial(ctx, endpoint, criclient.WithLogger(log))
	if err != nil {
		return fmt.Errorf("connect to runtime %s: %w", endpoint, err)
	}
	defer client.Close()

	reg := prometheus.NewRegistry()
	progress := newProgress(out, !o.json && isTerminal(out))
	a, err := agent.New(client.CRI(), client.CRI(), agent.WithMode(mode), agent.WithLogger(log), agent.WithTuning(agent.Tuning{Metrics: reg}), agent.WithNode(agent.Node{PodDir: o.podDir}),
		agent.WithEventHook(progress.observe))
	if err != nil {
		return err
	}
	if err := a.Start(); err != nil {
		return err
	}
	// stopAgent stops the agent and, with cleanup, removes its pods: a
	// failed removal is retried until --cleanup-timeout, and what is left
	// then fails the run, so nothing the agent made is left silently.
	stopAgent := func() error {
		a.Stop()
		if !o.cleanup {
			return nil
		}
		wait := o.cleanupWait
		if wait <= 0 {
			wait = defaultCleanupWait
		}
		cctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := a.Cleanup(cctx); err != nil {
			var ce *agent.CleanupError
			if errors.As(err, &ce) {
				return fmt.Errorf("cleanup: %d pods still on the runtime after %v: %s (last error: %w)",
					len(ce.Remaining), wait, strings.Join(ce.Remaining, ", "), ce.Err)
			}
			return fmt.Errorf("cleanup: %w", err)
		}
		return nil
	}
	if o.metricsAddr != "" {
		shutdown, err := serveMetrics(o.metricsAddr, reg, log)
		if err != nil {
			return errors.Join(err, stopAgent())
		}
		defer shutdown()
	}

	start := time.Now()
	if o.manifests != "" {
		apply := a.Apply
		if onPod != nil {
			apply = func(u agent.PodUpdate) {
				if u.Op != agent.OpDelete {
					u.Pod = u.Pod.DeepCopy()
					onPod(u.Pod)
				}
				a.Apply(u)
			}
		}
		src := manifest.NewDir(o.manifests, apply, manifest.WithLogger(log),
			manifest.WithErrors(func(err error) {
				progress.clear()
				fmt.Fprintln(os.Stderr, "manifest error:", err)
			}))
		// The manifests' pods first, then what the runtime holds of an
		// earlier run whose manifest is gone (the agent was killed with
		// pods running): the pods still asked for are adopted as they
		// are, the others removed.
		if err := src.Sync(); err != nil {
			return errors.Join(err, stopAgent())
		}
		if removed, err := a.RemoveOrphans(ctx); err != nil {
			log.Warn("remove orphaned pods", zap.Error(err))
		} else if len(removed) > 0 {
			log.Info("removed pods whose manifests are gone", zap.Strings("pods", removed))
		}
		srcErr := make(chan error, 1)
		lctx, cancelLoop := context.WithCancel(ctx)
		defer cancelLoop()
		go func() { srcErr <- src.Run(lctx) }()
		var until func(agent.Snapshot) bool
		if o.untilUp {
			until = func(s agent.Snapshot) bool { return s.Total > 0 && s.Running == s.Total }
		}
		err := progress.loop(lctx, a, until)
		cancelLoop() // stops the manifest watcher too
		if e := <-srcErr; e != nil && err == nil {
			err = e
		}
		snap, stats := a.Snapshot(), a.Stats()
		cerr := stopAgent()
		progress.clear()
		if perr := printSummary(out, snap, stats, time.Since(start), mode, o.json); perr != nil {
			return errors.Join(perr, cerr)
		}
		return errors.Join(err, cerr)
	}

	for _, p := range pods {
		a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: p, Source: "demo"})
	}
	dctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	err = progress.loop(dctx, a, demoDone)
	snap, stats := a.Snapshot(), a.Stats()
	cerr := stopAgent()
	progress.clear()
	if perr := printSummary(out, snap, stats, time.Since(start), mode, o.json); perr != nil {
		return errors.Join(perr, cerr)
	}
	if errors.Is(dctx.Err(), context.DeadlineExceeded) {
		return errors.Join(fmt.Errorf("demo: pods not running after %v", o.timeout), cerr)
	}
	return errors.Join(err, cerr)
}

// demoDone: every pod is running, and the crash-looping one is in back-off.
func demoDone(s agent.Snapshot) bool {
	if s.Total == 0 {
		return false
	}
	for _, p := range s.Pods {
		switch {
		case p.State == "Running" && p.Startup > 0:
		case p.State == "CrashLoopBackOff" && p.Restarts >= 1:
		default:
			return false
		}
	}
	return true
}

func serveMetrics(addr string, reg *prometheus.Registry, log *zap.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server", zap.Error(err))
		}
	}()
	log.Info("serving metrics", zap.String("addr", ln.Addr().String()))
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}, nil
}
