package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

var scenarioOrder = []string{"burst", "big-image", "stall", "churn"}

func main() {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	names := fs.String("scenarios", strings.Join(scenarioOrder, ","), "scenarios to run: "+strings.Join(scenarioOrder, ", ")+", cpu-burst (not in the default set)")
	modes := fs.String("modes", "baseline,syncpod", "modes to run, in order")
	cpuModes := fs.String("cpu-burst-modes", strings.Join(cpuBurstModes, ","), "cpu-burst modes to run, in order")
	cpuAdmission := fs.String("cpu-burst-admission", "", "the syncpod mode's start admission: empty for the default AIMD, fixed=N, or AIMD fields as initial=N,min=N,max=N,backoff=F,tolerance=F,saturated=F, and cpu=0 for latency alone")
	scale := fs.Float64("scale", 0.5, "multiply every simulated latency, bandwidth time and kubelet period by this")
	endpoint := fs.String("runtime-endpoint", "", "run against a real CRI runtime instead of the simulated one")
	images := fs.String("images", "", "with --runtime-endpoint: comma-separated pullable images standing in for the scenario's")
	initCmd := fs.String("init-command", "/bin/sh -c true", "with --runtime-endpoint: init container command")
	appCmd := fs.String("app-command", "/bin/sh -c 'sleep 3600'", "with --runtime-endpoint: app and sidecar command")
	svgPath := fs.String("svg", "node-cdf.svg", "write the startup-latency CDF chart here (empty: do not)")
	asJSON := fs.Bool("json", false, "print results as JSON")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up on a run after this long")
	logLevel := fs.String("log-level", "error", "zap log level (stderr)")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	lvl, err := zapcore.ParseLevel(*logLevel)
	if err != nil {
		fatal(err)
	}
	zc := zap.NewDevelopmentConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.OutputPaths = []string{"stderr"}
	log, err := zc.Build()
	if err != nil {
		fatal(err)
	}
	rc := runConfig{endpoint: *endpoint, scale: *scale, timeout: *timeout, log: log, traceAdmission: lvl <= zapcore.InfoLevel, admission: *cpuAdmission}
	if *endpoint != "" {
		imgs := splitList(*images)
		if len(imgs) == 0 {
			fatal(fmt.Errorf("--runtime-endpoint needs --images"))
		}
		rc.real = &realImages{images: imgs, initCmd: shellWords(*initCmd), appCmd: shellWords(*appCmd)}
	}
	all := scenarios(*scale)
	var results []Result
	var cpuResults []CPUResult
	for _, name := range splitList(*names) {
		if name == "cpu-burst" {
			fmt.Fprintf(os.Stderr, "running cpu-burst (%d pods x 3 containers on 2 busy cores) in modes %v...\n", cpuBurstPods, splitList(*cpuModes))
			r, err := runCPUBurst(ctx, rc, splitList(*cpuModes), cpuBurstPods)
			if err != nil {
				fatal(err)
			}
			cpuResults = append(cpuResults, r...)
			continue
		}
		scs, ok := all[name]
		if !ok {
			fatal(fmt.Errorf("unknown scenario %q", name))
		}
		for _, sc := range scs {
			lb, why := time.Duration(0), ""
			if *endpoint == "" && sc.Stall == nil && sc.Churn == nil {
				lb, why = lowerBound(sc, 0.99)
			}
			for _, m := range splitList(*modes) {
				var mode agent.Mode
				if err := mode.Set(m); err != nil {
					fatal(err)
				}
				fmt.Fprintf(os.Stderr, "running %s (%s) in %s mode...\n", sc.Name, sc.About, mode)
				r, err := runScenario(ctx, sc, mode, rc)
				if err != nil {
					fatal(err)
				}
				r.LowerBoundP99, r.LowerBoundExplain = lb, why
				results = append(results, r)
				if ctx.Err() != nil {
					fatal(ctx.Err())
				}
			}
		}
	}
	if *svgPath != "" {
		f, err := os.Create(*svgPath)
		if err != nil {
			fatal(err)
		}
		if err := writeCDF(f, results); err != nil {
			fatal(err)
		}
		if err := f.Close(); err != nil {
			fatal(err)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Scenarios []Result
			CPUBurst  []CPUResult `json:",omitempty"`
		}{results, cpuResults})
		return
	}
	if len(results) > 0 {
		printTable(os.Stdout, results, *scale, *endpoint)
	}
	if len(cpuResults) > 0 {
		where := fmt.Sprintf("simulated node (crisim) with 2 cores (crisim.WithCPU), latencies x%.2f", *scale)
		if *endpoint != "" {
			where = "runtime " + *endpoint
		}
		printCPUTable(os.Stdout, cpuResults, where)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	quote := rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '\'' || r == '"'):
			quote = r
		case quote == 0 && r == ' ':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

func printTable(w io.Writer, results []Result, scale float64, endpoint string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tmode\tpods\tmakespan\tp50\tp99\tworker blocked\tmax relist\tPLEG unhealthy\truntime calls\tgoroutines start/peak/end\tpeak heap MiB\tp99 bound\tp99/bound\t")
	for _, r := range results {
		ratio := "-"
		if r.LowerBoundP99 > 0 {
			ratio = fmt.Sprintf("%.2f", float64(r.P99)/float64(r.LowerBoundP99))
		}
		to := ""
		if r.TimedOut {
			to = " (timeout)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d/%d/%d\t%.1f\t%s\t%s\t\n",
			r.Scenario, r.Mode, r.Started, r.Pods, ms(r.Makespan), to, ms(r.P50), ms(r.P99), ms(r.Blocked), ms(r.MaxRelist),
			ms(r.Unhealthy), r.Calls, r.GoroutinesBefore, r.GoroutinesPeak, r.GoroutinesAfter, float64(r.PeakHeap)/(1<<20),
			ms(r.LowerBoundP99), ratio)
	}
	_ = tw.Flush()
	where := fmt.Sprintf("simulated node (crisim), every latency and period x%.2f", scale)
	if endpoint != "" {
		where = "runtime " + endpoint
	}
	fmt.Fprintf(w, "\n%s\n", where)
	get := func(sc, mode string) *Result {
		for i := range results {
			if results[i].Scenario == sc && results[i].Mode == mode {
				return &results[i]
			}
		}
		return nil
	}
	if b, s := get("burst", "baseline"), get("burst", "syncpod"); b != nil && s != nil && s.P99 > 0 {
		fmt.Fprintf(w, "burst: p99 baseline/syncpod = %.2fx (aim >= 3x)", float64(b.P99)/float64(s.P99))
		if s.LowerBoundP99 > 0 {
			fmt.Fprintf(w, "; syncpod p99/bound = %.2f (aim <= 1.3)", float64(s.P99)/float64(s.LowerBoundP99))
		}
		fmt.Fprintln(w)
		if s.LowerBoundExplain != "" {
			fmt.Fprintf(w, "burst bound: %s\n", s.LowerBoundExplain)
		}
	}
	for _, m := range []string{"baseline", "syncpod"} {
		if b, n := get("big-image", m), get("no-big-image", m); b != nil && n != nil && n.P99 > 0 {
			fmt.Fprintf(w, "big-image %s: small-pod p99 with/without the big image = %.2f (aim <= 1.2 for syncpod)\n", m, float64(b.P99)/float64(n.P99))
		}
	}
	for _, r := range results {
		if r.Scenario == "stall" {
			fmt.Fprintf(w, "stall %s: PLEG unhealthy %s, last pod running %s after the stall ended\n", r.Mode, ms(r.Unhealthy), ms(r.RecoveredAfter))
		}
		if r.Scenario == "churn" {
			fmt.Fprintf(w, "churn %s: after deleting every pod: %d workers, %d per-pod entries; goroutines %d before, %d after\n",
				r.Mode, r.WorkersAfter, r.EntriesAfter, r.GoroutinesBefore, r.GoroutinesAfter)
		}
	}
}
