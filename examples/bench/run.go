package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

// Result is one scenario run in one mode.
type Result struct {
	Scenario, Mode    string
	Pods              int // measured pods
	Started           int
	Makespan          time.Duration // apply → last measured pod running (churn: whole run)
	Startups          []time.Duration
	P50, P99          time.Duration
	Blocked           time.Duration
	MaxRelist         time.Duration
	Unhealthy         time.Duration
	Calls             int64
	GoroutinesBefore  int
	GoroutinesPeak    int
	GoroutinesAfter   int
	PeakHeap          uint64
	WorkersAfter      int // churn: live workers once every pod is deleted
	EntriesAfter      int // churn: per-pod entries once every pod is deleted
	RecoveredAfter    time.Duration
	TimedOut          bool
	LowerBoundP99     time.Duration
	LowerBoundExplain string
	// CallLatency is each CRI method's latencies, by method name.
	CallLatency map[string]callLatency
	// Unseen is, when a run timed out, the agent's report of each measured
	// pod it had not seen running, and its PLEG's figures then: what to
	// look at when the runtime did start them.
	Unseen []string
}

// callCounter keeps the latency of each call the agent's client sends to
// the runtime, by method (admission to answer, as criclient's observer
// reports them).
type callCounter struct {
	mu  sync.Mutex
	lat map[string][]time.Duration
}

func (c *callCounter) observe(e criclient.Event) {
	if e.Kind != criclient.CallFinished {
		return
	}
	c.mu.Lock()
	if c.lat == nil {
		c.lat = map[string][]time.Duration{}
	}
	c.lat[e.Method] = append(c.lat[e.Method], e.Latency)
	c.mu.Unlock()
}

// callLatency is one CRI method's latencies in a run.
type callLatency struct {
	Calls    int
	P50, P99 time.Duration
}

// latencies summarizes each method's latencies so far.
func (c *callCounter) latencies() map[string]callLatency {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]callLatency{}
	for m, ds := range c.lat {
		out[m] = callLatency{Calls: len(ds), P50: percentile(ds, 50), P99: percentile(ds, 99)}
	}
	return out
}

type runConfig struct {
	endpoint string
	scale    float64
	timeout  time.Duration
	log      *zap.Logger
	real     *realImages
	// traceAdmission logs the start admission's bound, grants held and
	// requests queued every 100 ms of a cpu-burst run, at info level.
	traceAdmission bool
	// admission sets the syncpod mode's start admission (parseAdmission);
	// empty is the default AIMD.
	admission string
	// applied, when set, hears each pod's namespace/name as it is handed
	// to the agent, for measurements made from outside it.
	applied func(key string, at time.Time)
	// settled, when set, is called once the run is measured, before the
	// agent stops and removes its pods.
	settled func()
	// timedOut, when set, is called when a run timed out, before the
	// agent stops: what is still running shows where the run is held.
	timedOut func(sc Scenario, mode agent.Mode)
	// external, when set, runs pods with an orchestrator outside this
	// process (the cpu-burst's kubelet modes, named "kubelet" and
	// "kubelet-..."; mode says which): it returns each started pod's
	// startup and whether the deadline passed first.
	external func(ctx context.Context, mode string, pods []*corev1.Pod, deadline time.Time) ([]time.Duration, bool, error)
}

func (rc runConfig) apply(a *agent.Agent, u agent.PodUpdate) {
	if rc.applied != nil && u.Op == agent.OpAdd {
		rc.applied(u.Pod.Namespace+"/"+u.Pod.Name, time.Now())
	}
	a.Apply(u)
}

func runScenario(ctx context.Context, sc Scenario, mode agent.Mode, rc runConfig) (Result, error) {
	res := Result{Scenario: sc.Name, Mode: string(mode)}
	runtime.GC()
	res.GoroutinesBefore = runtime.NumGoroutine()

	endpoint := rc.endpoint
	var srv *crisim.Server
	if endpoint == "" {
		var err error
		srv, err = crisim.Start(sc.Runtime.Options()...)
		if err != nil {
			return res, fmt.Errorf("%s: start simulated runtime: %w", sc.Name, err)
		}
		defer srv.Close()
		endpoint = srv.Endpoint()
	}
	pods := sc.Pods
	if rc.real != nil {
		pods = rc.real.rewrite(pods)
	}
	calls := &callCounter{}
	client, err := criclient.Dial(ctx, endpoint, criclient.WithObserver(calls.observe), criclient.WithLogger(rc.log))
	if err != nil {
		return res, fmt.Errorf("%s: dial %s: %w", sc.Name, endpoint, err)
	}
	defer client.Close()

	var mu sync.Mutex
	startups := map[string]time.Duration{}
	a, err := agent.New(client.CRI(), client.CRI(), agent.WithMode(mode), agent.WithLogger(rc.log),
		// The stall scenario's unhealthy time is seconds long: sample finely.
		agent.WithTuning(agent.Tuning{TimeScale: rc.scale, HealthThreshold: sc.HealthThreshold, HealthSampling: 20 * time.Millisecond}),
		agent.WithEventHook(func(e agent.Event) {
			if e.Type == "PodRunning" {
				mu.Lock()
				startups[e.Pod] = e.Duration
				mu.Unlock()
			}
		}))
	if err != nil {
		return res, err
	}
	if rc.endpoint != "" { // a real runtime may hold pods of an earlier, interrupted run
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := a.Cleanup(cctx)
		cancel()
		if err != nil {
			return res, fmt.Errorf("%s: pods of an earlier run: %w", sc.Name, err)
		}
	}
	if err := a.Start(); err != nil {
		return res, err
	}

	// Goroutine and heap peaks, sampled.
	sampleDone := make(chan struct{})
	var sampleWG sync.WaitGroup
	var peakG int
	var peakHeap uint64
	sampleWG.Add(1)
	go func() {
		defer sampleWG.Done()
		t := time.NewTicker(25 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			if g := runtime.NumGoroutine(); g > peakG {
				peakG = g
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap {
				peakHeap = ms.HeapInuse
			}
			select {
			case <-sampleDone:
				return
			case <-t.C:
			}
		}
	}()

	for _, p := range pods {
		if sc.measures(p.Namespace + "/" + p.Name) {
			res.Pods++
		}
	}
	deadline := time.Now().Add(rc.timeout)
	t0 := time.Now()
	var stallEnd time.Time
	if sc.Churn != nil {
		res.TimedOut = !runChurn(rc, a, pods, sc.Churn, deadline)
	} else {
		for _, p := range pods {
			rc.apply(a, agent.PodUpdate{Op: agent.OpAdd, Pod: p, Source: "bench"})
		}
		if sc.Stall != nil && srv != nil {
			stallTimer := time.AfterFunc(sc.Stall.After, func() { srv.Runtime().Stall(sc.Stall.For) })
			defer stallTimer.Stop()
			stallEnd = t0.Add(sc.Stall.After + sc.Stall.For)
		}
		for {
			mu.Lock()
			n := 0
			for k := range startups {
				if sc.measures(k) {
					n++
				}
			}
			mu.Unlock()
			if n >= res.Pods {
				break
			}
			if time.Now().After(deadline) {
				res.TimedOut = true
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	res.Makespan = time.Since(t0)
	st := a.Stats()
	rc.log.Info("run done", zap.String("scenario", sc.Name), zap.String("mode", string(mode)), zap.Any("pleg", st.PLEG))
	if res.TimedOut && sc.Churn == nil {
		mu.Lock()
		for _, p := range a.Snapshot().Pods {
			key := p.Namespace + "/" + p.Name
			if _, seen := startups[key]; sc.measures(key) && !seen {
				res.Unseen = append(res.Unseen, fmt.Sprintf("%s: %+v", key, p))
			}
		}
		mu.Unlock()
		res.Unseen = append(res.Unseen, fmt.Sprintf("PLEG: %+v", st.PLEG))
	}
	res.Blocked, res.MaxRelist, res.Unhealthy = st.WorkerBlocked, st.MaxRelist, st.PLEGUnhealthy
	if sc.Churn != nil {
		res.Startups = st.Startups
		res.WorkersAfter, res.EntriesAfter = st.Workers, st.CacheEntries
	} else {
		mu.Lock()
		var last time.Duration
		for k, d := range startups {
			if sc.measures(k) {
				res.Startups = append(res.Startups, d)
				last = max(last, d)
			}
		}
		mu.Unlock()
		res.Makespan = last
		if !stallEnd.IsZero() {
			res.RecoveredAfter = t0.Add(last).Sub(stallEnd)
		}
	}
	res.CallLatency = calls.latencies()
	for _, l := range res.CallLatency {
		res.Calls += int64(l.Calls)
	}
	res.Started = len(res.Startups)
	sort.Slice(res.Startups, func(i, j int) bool { return res.Startups[i] < res.Startups[j] })
	res.P50, res.P99 = percentile(res.Startups, 50), percentile(res.Startups, 99)

	if res.TimedOut && rc.timedOut != nil {
		rc.timedOut(sc, mode)
	}
	if rc.settled != nil {
		rc.settled()
	}
	a.Stop()
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	if err := a.Cleanup(cctx); err != nil {
		rc.log.Warn("cleanup", zap.Error(err))
	}
	cancel()
	close(sampleDone)
	sampleWG.Wait()
	res.GoroutinesPeak, res.PeakHeap = peakG, peakHeap
	_ = client.Close()
	if srv != nil {
		_ = srv.Close()
	}
	// Let exiting goroutines finish before counting.
	for i := 0; i < 100 && runtime.NumGoroutine() > res.GoroutinesBefore; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	res.GoroutinesAfter = runtime.NumGoroutine()
	return res, nil
}

// runChurn creates a pod every c.Every and deletes it c.Life later, then
// waits for every worker to be gone. It reports false on timeout.
func runChurn(rc runConfig, a *agent.Agent, pods []*corev1.Pod, c *ChurnSpec, deadline time.Time) bool {
	ok := runChurnLoop(pods, c, deadline,
		func(p *corev1.Pod) { rc.apply(a, agent.PodUpdate{Op: agent.OpAdd, Pod: p, Source: "bench"}) },
		func(p *corev1.Pod) { a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: p, Source: "bench"}) })
	if !ok {
		return false
	}
	// Every worker gone, then every per-pod entry (the baseline's relist
	// drops cache entries of removed pods on its next pass).
	for st := a.Stats(); st.Workers > 0 || st.CacheEntries > 0; st = a.Stats() {
		if time.Now().After(deadline) {
			return st.Workers == 0
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// runChurnLoop adds one of pods every c.Every and removes each c.Life after it
// was added, until all came and went; false when deadline passed first.
func runChurnLoop(pods []*corev1.Pod, c *ChurnSpec, deadline time.Time, add, remove func(*corev1.Pod)) bool {
	type live struct {
		pod *corev1.Pod
		at  time.Time
	}
	var alive []live
	next := 0
	tick := time.NewTicker(c.Every)
	defer tick.Stop()
	for next < len(pods) || len(alive) > 0 {
		now := time.Now()
		if next < len(pods) {
			add(pods[next])
			alive = append(alive, live{pods[next], now})
			next++
		}
		for len(alive) > 0 && now.Sub(alive[0].at) >= c.Life {
			remove(alive[0].pod)
			alive = alive[1:]
		}
		if now.After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// realImages substitutes real, pullable images (and commands) for the
// simulated ones when the benchmark runs against a real runtime.
type realImages struct {
	images            []string
	initCmd, initArgs []string
	appCmd, appArgs   []string
}

func (r *realImages) rewrite(pods []*corev1.Pod) []*corev1.Pod {
	byRef := map[string]string{}
	pick := func(ref string) string {
		if v, ok := byRef[ref]; ok {
			return v
		}
		v := r.images[len(byRef)%len(r.images)]
		byRef[ref] = v
		return v
	}
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		p = p.DeepCopy()
		// The pushed images are tagged latest, for which a kubelet would
		// default to pulling before every container start (and meet its
		// pull QPS); the scenarios mean a pull per image and node.
		setPullPolicy := func(cs []corev1.Container) {
			for j := range cs {
				cs[j].ImagePullPolicy = corev1.PullIfNotPresent
			}
		}
		setPullPolicy(p.Spec.InitContainers)
		setPullPolicy(p.Spec.Containers)
		for j := range p.Spec.InitContainers {
			c := &p.Spec.InitContainers[j]
			c.Image = pick(c.Image)
			if c.RestartPolicy == nil {
				c.Command, c.Args = r.initCmd, r.initArgs
			} else {
				c.Command, c.Args = r.appCmd, r.appArgs
			}
		}
		for j := range p.Spec.Containers {
			c := &p.Spec.Containers[j]
			c.Image = pick(c.Image)
			c.Command, c.Args = r.appCmd, r.appArgs
		}
		out[i] = p
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
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
