package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// Odd runs run the modes in reverse, so each mode runs first as often as
// last over an even count of runs.
func TestModeOrder(t *testing.T) {
	modes := []string{"kubelet", "kubelet-tuned", "syncpod"}
	if got := modeOrder(modes, 0); !slices.Equal(got, modes) {
		t.Errorf("run 0: %v", got)
	}
	if got := modeOrder(modes, 1); !slices.Equal(got, []string{"syncpod", "kubelet-tuned", "kubelet"}) {
		t.Errorf("run 1: %v", got)
	}
	if got := modeOrder(modes, 4); !slices.Equal(got, modes) {
		t.Errorf("run 4: %v", got)
	}
	if modes[0] != "kubelet" {
		t.Errorf("modeOrder changed its argument: %v", modes)
	}
}

func TestNewSpread(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		in   []time.Duration
		want spread
	}{
		{nil, spread{}},
		{[]time.Duration{3 * s}, spread{3 * s, 3 * s, 3 * s}},
		{[]time.Duration{5 * s, 1 * s, 3 * s, 9 * s, 2 * s}, spread{3 * s, 1 * s, 9 * s}},
		{[]time.Duration{4 * s, 1 * s, 2 * s, 8 * s}, spread{3 * s, 1 * s, 8 * s}}, // mean of the middle two
	} {
		in := slices.Clone(tc.in)
		if got := newSpread(in); got != tc.want {
			t.Errorf("newSpread(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("newSpread sorted its argument: %v", in)
		}
	}
}

// Five runs of two scenarios, interleaved by mode: one row per scenario
// and mode, each scenario's rows together, medians and ranges of every
// figure, the fewest pods started and the timeouts counted.
func TestSummarizeStarts(t *testing.T) {
	ms := time.Millisecond
	var results []startResult
	for run, p99 := range []time.Duration{500, 100, 300, 200, 400} {
		for _, mode := range modeOrder([]string{"kubelet", "syncpod"}, run) {
			f := time.Duration(1)
			if mode == "syncpod" {
				f = 2
			}
			started := 12
			if mode == "syncpod" && run == 3 {
				started = 11
			}
			results = append(results,
				startResult{Scenario: "burst", Mode: mode, Pods: 12, Started: started, TimedOut: started < 12,
					Makespan: 2 * p99 * ms / f, P50: p99 / 2 * ms / f, P99: p99 * ms / f},
				startResult{Scenario: "churn", Mode: mode, Pods: 20, Started: 20, P50: ms, P99: ms, Makespan: ms})
		}
	}
	sums := summarizeStarts(results)
	var keys []string
	for _, s := range sums {
		keys = append(keys, s.Scenario+"/"+s.Mode)
	}
	if want := []string{"burst/kubelet", "burst/syncpod", "churn/kubelet", "churn/syncpod"}; !slices.Equal(keys, want) {
		t.Fatalf("rows %v, want %v", keys, want)
	}
	k, s := sums[0], sums[1]
	if k.Runs != 5 || k.TimedOut != 0 || k.MinStarted != 12 || k.Pods != 12 {
		t.Errorf("kubelet: %+v", k)
	}
	if k.P99 != (spread{300 * ms, 100 * ms, 500 * ms}) || k.P50 != (spread{150 * ms, 50 * ms, 250 * ms}) ||
		k.Makespan != (spread{600 * ms, 200 * ms, 1000 * ms}) {
		t.Errorf("kubelet figures: p50 %v, p99 %v, makespan %v", k.P50, k.P99, k.Makespan)
	}
	if s.TimedOut != 1 || s.MinStarted != 11 || s.P99 != (spread{150 * ms, 50 * ms, 250 * ms}) {
		t.Errorf("syncpod: %+v", s)
	}

	var out bytes.Buffer
	printStartSummary(&out, sums)
	var row string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "burst") && strings.Contains(line, "syncpod") {
			row = line
		}
	}
	// syncpod's medians are half the kubelet's: 2.00x at p50 and p99;
	// there is no tuned kubelet to compare with.
	if !strings.Contains(row, "150ms (50ms-250ms)") || strings.Count(row, "2.00x") != 2 || !strings.Contains(row, "(1 timed out)") || !strings.Contains(row, "11/12") {
		t.Errorf("syncpod row %q\n%s", row, out.String())
	}
}

func TestBenchRuns(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
		ok   bool
	}{{"", 1, true}, {"5", 5, true}, {"0", 0, false}, {"-1", 0, false}, {"x", 0, false}} {
		t.Setenv("SYNCPOD_BENCH_RUNS", tc.env)
		got, err := benchRuns()
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("SYNCPOD_BENCH_RUNS=%q: %d, %v", tc.env, got, err)
		}
	}
}

// Every kubelet column is a kubelet mode of the cpu-burst, which refuses
// to run one without a kubelet.
func TestCPUBurstKubeletModes(t *testing.T) {
	for _, mode := range []string{"kubelet", "kubelet-tuned", "kubelet-tuned-cd"} {
		if !isKubeletMode(mode) {
			t.Errorf("%s is not a kubelet mode", mode)
		}
	}
	for _, mode := range []string{"syncpod", "baseline", "kubeletish", "all-at-once"} {
		if isKubeletMode(mode) {
			t.Errorf("%s is a kubelet mode", mode)
		}
	}
	rc := runConfig{scale: 0.1, timeout: time.Minute, log: zap.NewNop()}
	if _, err := runCPUBurst(context.Background(), rc, []string{"kubelet-tuned"}, 1); err == nil || !strings.Contains(err.Error(), "kubelet-tuned needs a kubelet") {
		t.Errorf("kubelet-tuned without a kubelet: %v", err)
	}
}

// The one-run table gives each row's ratios to the default and the tuned
// kubelet, and none to itself, and its p99 over the lower bound's.
func TestPrintStartTable(t *testing.T) {
	s := time.Second
	var out bytes.Buffer
	printStartTable(&out, []startResult{
		{Scenario: "burst", Mode: "kubelet", Pods: 3, Started: 3, Makespan: 6 * s, P50: 4 * s, P99: 6 * s},
		{Scenario: "burst", Mode: "kubelet-tuned", Pods: 3, Started: 3, Makespan: 4 * s, P50: 2 * s, P99: 4 * s},
		{Scenario: "burst", Mode: "syncpod", Pods: 3, Started: 3, Makespan: 2 * s, P50: 1 * s, P99: 2 * s},
		{Scenario: "burst", Mode: boundMode, Pods: 3, Started: 3, Makespan: 1 * s, P50: s / 2, P99: 1 * s},
	})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := map[string][]string{
		"kubelet":       {"-", "-", "0.50x", "0.67x", "6.00x"},
		"kubelet-tuned": {"2.00x", "1.50x", "-", "-", "4.00x"},
		"syncpod":       {"4.00x", "3.00x", "2.00x", "2.00x", "2.00x"},
		boundMode:       {"8.00x", "6.00x", "4.00x", "4.00x", "-"},
	}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if w, ok := want[f[1]]; !ok || !slices.Equal(f[len(f)-5:], w) {
			t.Errorf("%s: ratios %v, want %v\n%s", f[1], f[len(f)-5:], w, out.String())
		}
	}
}

// The usage table gives each mode's median CPU and, for the agent modes,
// the median of each call's p50 and p99 over the runs; the lower bound's
// explanation follows, the bound itself has no usage row.
func TestPrintUsage(t *testing.T) {
	ms := time.Millisecond
	var results []startResult
	for i, f := range []time.Duration{1, 3, 2} {
		results = append(results,
			startResult{Scenario: "burst", Mode: "kubelet", Usage: runUsage{Node: 100 * f * ms, Runtime: 60 * f * ms, Orchestrator: 10 * f * ms}},
			startResult{Scenario: "burst", Mode: "syncpod", Usage: runUsage{Node: 50 * f * ms},
				Calls: map[string]callLatency{"RunPodSandbox": {Calls: 12, P50: 40 * f * ms, P99: 90 * f * ms}}},
			startResult{Scenario: "burst", Mode: boundMode, Bound: fmt.Sprintf("run %d", i)})
	}
	sums := summarizeStarts(results)
	if k := sums[0]; k.Node != (spread{200 * ms, 100 * ms, 300 * ms}) || k.Runtime.Median != 120*ms || k.Orchestrator.Median != 20*ms || k.CallP99 != nil {
		t.Errorf("kubelet usage: %+v", k)
	}
	if s := sums[1]; s.CallP50["RunPodSandbox"] != 80*ms || s.CallP99["RunPodSandbox"] != 180*ms {
		t.Errorf("syncpod calls: p50 %v, p99 %v", s.CallP50, s.CallP99)
	}
	var out bytes.Buffer
	printUsage(&out, sums)
	text := out.String()
	for _, want := range []string{"80ms/180ms", "burst lower bound: run 2"} {
		if !strings.Contains(text, want) {
			t.Errorf("usage table lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "  "+boundMode+"  ") {
		t.Errorf("the bound has a usage row:\n%s", text)
	}
}
