package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
)

// benchRuns reads SYNCPOD_BENCH_RUNS, how many times the real-node
// benchmark runs each scenario's modes (default 1).
func benchRuns() (int, error) {
	v := os.Getenv("SYNCPOD_BENCH_RUNS")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("SYNCPOD_BENCH_RUNS=%q: want a positive count", v)
	}
	return n, nil
}

// modeOrder is the order in which run (from 0) runs modes: as given in
// even runs, reversed in odd ones, so no mode always runs first on a
// fresh node or last on a warm one, and a drift of the machine's speed
// within a series falls on every mode alike.
func modeOrder(modes []string, run int) []string {
	out := slices.Clone(modes)
	if run%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// spread is one figure over several runs.
type spread struct {
	Median, Min, Max time.Duration
}

// newSpread summarizes ds (not changed): the median (the mean of the two
// middle values for an even count), the least and the greatest.
func newSpread(ds []time.Duration) spread {
	if len(ds) == 0 {
		return spread{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{Median: m, Min: s[0], Max: s[len(s)-1]}
}

func (s spread) String() string {
	return fmt.Sprintf("%s (%s-%s)", ms(s.Median), ms(s.Min), ms(s.Max))
}

// startSummary is one scenario and mode over every run.
type startSummary struct {
	Scenario, Mode        string
	Runs, TimedOut        int // runs, and how many of them timed out
	MinStarted, Pods      int // the fewest pods started in a run, of Pods
	Makespan, P50, P99    spread
	p50s, p99s, makespans []time.Duration
	// The CPU each run cost, and each CRI method's latencies (agent
	// modes): medians over the runs.
	Node, Runtime, Orchestrator spread
	usages                      []runUsage
	CallP50, CallP99            map[string]time.Duration
	calls                       map[string][]callLatency
	// Bound is the last run's explanation of a lower-bound row.
	Bound string
}

// summarizeStarts groups results by scenario and mode, in the order each
// scenario and, within it, each mode first appears.
func summarizeStarts(results []startResult) []startSummary {
	var out []startSummary
	index := map[[2]string]int{}
	for _, r := range results {
		key := [2]string{r.Scenario, r.Mode}
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, startSummary{Scenario: r.Scenario, Mode: r.Mode, Pods: r.Pods, MinStarted: r.Started})
		}
		s := &out[i]
		s.Runs++
		if r.TimedOut {
			s.TimedOut++
		}
		s.MinStarted = min(s.MinStarted, r.Started)
		s.makespans = append(s.makespans, r.Makespan)
		s.p50s = append(s.p50s, r.P50)
		s.p99s = append(s.p99s, r.P99)
		s.usages = append(s.usages, r.Usage)
		for m, l := range r.Calls {
			if s.calls == nil {
				s.calls = map[string][]callLatency{}
			}
			s.calls[m] = append(s.calls[m], l)
		}
		if r.Bound != "" {
			s.Bound = r.Bound
		}
	}
	// Keep each scenario's rows together even when the scenarios were
	// interleaved.
	scenarioRank := map[string]int{}
	for i, s := range out {
		if _, ok := scenarioRank[s.Scenario]; !ok {
			scenarioRank[s.Scenario] = i
		}
	}
	slices.SortStableFunc(out, func(a, b startSummary) int { return scenarioRank[a.Scenario] - scenarioRank[b.Scenario] })
	for i := range out {
		s := &out[i]
		s.Makespan, s.P50, s.P99 = newSpread(s.makespans), newSpread(s.p50s), newSpread(s.p99s)
		var node, rt, orch []time.Duration
		for _, u := range s.usages {
			node, rt, orch = append(node, u.Node), append(rt, u.Runtime), append(orch, u.Orchestrator)
		}
		s.Node, s.Runtime, s.Orchestrator = newSpread(node), newSpread(rt), newSpread(orch)
		if len(s.calls) > 0 {
			s.CallP50, s.CallP99 = map[string]time.Duration{}, map[string]time.Duration{}
			for m, ls := range s.calls {
				var p50, p99 []time.Duration
				for _, l := range ls {
					p50, p99 = append(p50, l.P50), append(p99, l.P99)
				}
				s.CallP50[m], s.CallP99[m] = newSpread(p50).Median, newSpread(p99).Median
			}
		}
	}
	return out
}

// speedup is how many times faster mode's median is than ref's, "-" when
// either is missing.
func speedup(ref, mode time.Duration) string {
	if ref <= 0 || mode <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(ref)/float64(mode))
}

// printStartSummary renders the summaries: each figure's median and
// min-max over the runs, and the ratios of the medians to the default
// and the tuned kubelet's.
func printStartSummary(w io.Writer, sums []startSummary) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tmode\truns\tpods\tmakespan\tp50\tp99\tp50 kubelet/mode\tp99 kubelet/mode\tp50 tuned/mode\tp99 tuned/mode\tp99 mode/bound\t")
	ref := map[[2]string]startSummary{}
	for _, s := range sums {
		ref[[2]string{s.Scenario, s.Mode}] = s
	}
	for _, s := range sums {
		to := ""
		if s.TimedOut > 0 {
			to = fmt.Sprintf(" (%d timed out)", s.TimedOut)
		}
		cells := []string{s.Scenario, s.Mode, strconv.Itoa(s.Runs), fmt.Sprintf("%d/%d", s.MinStarted, s.Pods),
			s.Makespan.String() + to, s.P50.String(), s.P99.String()}
		for _, refMode := range []string{"kubelet", "kubelet-tuned"} {
			k, ok := ref[[2]string{s.Scenario, refMode}]
			if !ok || s.Mode == refMode {
				cells = append(cells, "-", "-")
				continue
			}
			cells = append(cells, speedup(k.P50.Median, s.P50.Median), speedup(k.P99.Median, s.P99.Median))
		}
		if lb, ok := ref[[2]string{s.Scenario, boundMode}]; ok && s.Mode != boundMode {
			cells = append(cells, speedup(s.P99.Median, lb.P99.Median))
		} else {
			cells = append(cells, "-")
		}
		for _, c := range cells {
			fmt.Fprint(tw, c, "\t")
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

// usageMethods are the CRI calls the usage table reports the latencies of.
var usageMethods = []string{"RunPodSandbox", "CreateContainer", "StartContainer", "PullImage"}

// printUsage renders where each mode's time went: the CPU its runs cost
// the node, containerd and its shims, and the orchestrator (medians over
// the runs), and for the agent modes the median over the runs of each
// call's p50 / p99 latency; then each scenario's lower bound explained.
func printUsage(w io.Writer, sums []startSummary) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "scenario\tmode\tnode CPU\tcontainerd+shims CPU\torchestrator CPU\t")
	for _, m := range usageMethods {
		fmt.Fprintf(tw, "%s p50/p99\t", m)
	}
	fmt.Fprintln(tw)
	for _, s := range sums {
		if s.Mode == boundMode {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t", s.Scenario, s.Mode, ms(s.Node.Median), ms(s.Runtime.Median), ms(s.Orchestrator.Median))
		for _, m := range usageMethods {
			if p99, ok := s.CallP99[m]; ok {
				fmt.Fprintf(tw, "%s/%s\t", ms(s.CallP50[m]), ms(p99))
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	for _, s := range sums {
		if s.Mode == boundMode && s.Bound != "" {
			fmt.Fprintf(w, "%s lower bound: %s\n", s.Scenario, s.Bound)
		}
	}
}
