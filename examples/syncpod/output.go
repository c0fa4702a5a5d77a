package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress draws one live status line on a terminal, and tells the run
// loop when the pods reach the state it waits for.
type progress struct {
	out     io.Writer
	live    bool
	start   time.Time
	changed chan struct{} // a pod or the PLEG changed: look again
	mu      sync.Mutex
	drawn   bool
}

func newProgress(out io.Writer, live bool) *progress {
	return &progress{out: out, live: live, start: time.Now(), changed: make(chan struct{}, 1)}
}

// observe is the agent's event hook: it never blocks the agent.
func (p *progress) observe(agent.Event) {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// loop redraws the line until ctx is done or done reports true. Off a
// terminal nothing is drawn and the loop only wakes on the agent's events,
// so an idle agent costs no timer here; on a terminal the line's clock
// ticks ten times a second.
func (p *progress) loop(ctx context.Context, a *agent.Agent, done func(agent.Snapshot) bool) error {
	var tick <-chan time.Time
	if p.live {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		tick = t.C
	}
	for {
		s := a.Snapshot()
		p.draw(s)
		if done != nil && done(s) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		case <-p.changed:
		}
	}
}

func (p *progress) draw(s agent.Snapshot) {
	if !p.live {
		return
	}
	health := "healthy"
	if !s.PLEGHealthy {
		health = "UNHEALTHY"
	}
	line := fmt.Sprintf("pods running %d/%d · pulls in flight %d · PLEG %s (%s) · %s",
		s.Running, s.Total, s.PullsInFlight, s.PLEGMode, health, time.Since(p.start).Round(100*time.Millisecond))
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "\r\033[K%s", line)
	p.drawn = true
}

func (p *progress) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.out, "\r\033[K")
		p.drawn = false
	}
}

type summary struct {
	Mode          string            `json:"mode"`
	Elapsed       string            `json:"elapsed"`
	Pods          []agent.PodReport `json:"pods"`
	Started       int               `json:"started"`
	P50           string            `json:"startupP50"`
	P90           string            `json:"startupP90"`
	P99           string            `json:"startupP99"`
	WorkerBlocked string            `json:"workerBlocked"`
	MaxRelist     string            `json:"maxRelist"`
	PLEGUnhealthy string            `json:"plegUnhealthy"`
	PLEGMode      string            `json:"plegMode"`
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

func printSummary(out io.Writer, s agent.Snapshot, st agent.Stats, elapsed time.Duration, mode agent.Mode, asJSON bool) error {
	ms := ms
	if asJSON {
		ms = func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	}
	sum := summary{Mode: string(mode), Elapsed: ms(elapsed), Pods: s.Pods, Started: st.StartupsTotal,
		P50: ms(percentile(st.Startups, 50)), P90: ms(percentile(st.Startups, 90)),
		P99: ms(percentile(st.Startups, 99)), WorkerBlocked: ms(st.WorkerBlocked),
		MaxRelist: ms(st.MaxRelist), PLEGUnhealthy: ms(st.PLEGUnhealthy), PLEGMode: s.PLEGMode}
	if sum.Pods == nil {
		sum.Pods = []agent.PodReport{}
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tSTATE\tSTARTUP\tPULL WAIT\tRESTARTS\tMESSAGE")
	for _, p := range s.Pods {
		msg := p.Message
		if len(msg) > 60 {
			msg = msg[:57] + "..."
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%d\t%s\n", p.Namespace, p.Name, p.State, ms(p.Startup), ms(p.PullWait), p.Restarts,
			strings.ReplaceAll(msg, "\n", " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "\nmode %s · %d pods started in %s · startup p50 %s  p90 %s  p99 %s\n"+
		"worker time blocked %s · max relist %s · PLEG %s, unhealthy for %s\n",
		sum.Mode, sum.Started, sum.Elapsed, sum.P50, sum.P90, sum.P99, sum.WorkerBlocked, sum.MaxRelist, sum.PLEGMode, sum.PLEGUnhealthy)
	return err
}

// percentile returns the p-th percentile (0..100) of ds by the
// nearest-rank method, 0 for an empty slice. ds is not modified.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := min(max(int(math.Ceil(p/100*float64(len(s)))), 1), len(s))
	return s[rank-1]
}
