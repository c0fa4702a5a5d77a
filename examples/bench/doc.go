// Command bench is the node benchmark: named scenarios, each run in
// baseline mode (today's kubelet behaviour) and in syncpod mode in one
// process, on a fresh simulated runtime with identical settings for both,
// and one table to compare them.
//
//	go run ./examples/bench                      # every scenario, both modes, ~1 min on 2 cores
//	go run ./examples/bench --scenarios=burst --svg=cdf.svg
//	go run ./examples/bench --runtime-endpoint unix:///run/containerd/containerd.sock \
//	    --images=registry.local/a:1,registry.local/b:1
//
// Scenarios:
//
//	burst         50 pods, each 1 init + 3 containers, over 10 images, all at once
//	big-image     20 small pods plus one pod on a 3 GB image; only the small pods
//	              are measured, and no-big-image runs them alone for the ratio
//	stall         a 30-pod burst during which every runtime call stalls for 3 s;
//	              the PLEG health threshold is lowered to 1.5 s so health and
//	              recovery show
//	churn         a pod every 100 ms, each deleted 8 s after creation, 60 pods;
//	              afterwards workers, per-pod entries and goroutines must be back
//	              where they started
//
// Columns: makespan (apply to the last measured pod running), pod startup
// p50 and p99 (creation to all containers running and observed, the SLO's
// definition), worker time blocked (summed over workers: pulls and cache
// waits inside syncs), max relist latency, time the PLEG reported
// unhealthy, runtime calls sent by the agent's client, goroutines at
// start/peak/end, peak heap in use (the simulated runtime shares the
// process), and the p99 lower bound with our ratio to it.
//
// The simulated node is crisim with its realistic (containerd-like,
// log-normal) latencies, 100 MB/s per download, 3 concurrent downloads, at
// most 16 runtime calls worked on at once and its store lock. --scale
// (default 0.5) multiplies every latency and download time, and the agent's
// kubelet periods (relist, thresholds, back-offs), by the same factor, to
// keep the run short; ratios are unchanged by it.
//
// The lower bound is the critical path of a perfect orchestrator under the
// runtime's caps, at median latencies: every image asked for at t=0 and
// downloaded shortest-first on the download slots; per pod, sandbox, then
// each init step once its image is present, then every container once its
// image is present; and the runtime's call capacity: the create+start work
// waiting for an image cannot begin before the image arrives, so the last
// pod is not up before avail(i) + work(after i)/C for any image i (work at
// mean latencies). See lowerBound in bound.go.
//
// The chart (--svg, default node-cdf.svg) has one panel per scenario with
// the startup-latency CDF of each mode and the p99 bound, in plain SVG.
//
// cpu-burst (not in the default set: --scenarios cpu-burst) is 50 pods x 3
// containers on a node whose starts are CPU-bound (crisim's CPU model, 2
// cores, with neither the store lock nor the cap on calls at once: the
// cores are what calls wait for), run as serial, all-at-once, baseline,
// unbounded (syncpod mode without start admission) and syncpod (with it),
// or as --cpu-burst-modes lists them; a mode may repeat, and each is
// compared with the mean of the all-at-once runs just before and after it.
// --cpu-burst-admission sets the syncpod mode's admission (fixed=N, or AIMD
// fields: initial=, min=, max=, backoff=, tolerance=, saturated=, cpu=0 for
// latency alone), and a mode syncpod@SETTING ("syncpod@fixed=6") runs a
// variant beside the default. Besides each orchestrator's own startups, the
// table gives them by the runtime's clock (its StartedAt for a pod's last
// container, alike for every mode), the core time spent, the core time
// left idle in the first tenth of the run, its middle and its last tenth
// (the simulated cores, or the node's /proc/stat), and this process's own
// core time. BenchmarkRealNodeCPUBurst runs it on real containerd after a
// discarded warm-up burst.
//
// With --runtime-endpoint the same scenarios run against a real CRI
// runtime, with --images standing in for the simulated images (round robin)
// and --init-command/--app-command as the containers' commands; there is no
// lower bound there. BenchmarkRealNodeScenarios in bench_test.go does that
// on a private containerd 2.4.2 with a loopback registry (internal/testnode),
// beside the real kubelet at its defaults, tuned for a burst, and tuned on a
// containerd with more downloads at once; SYNCPOD_BENCH_RUNS repeats each
// scenario's modes in alternating order and reports each figure's median
// and min-max. Before each scenario's run it measures the node's own lower
// bound, a lower-bound row: a sandbox's and a container start's latency
// and node CPU with nothing else running, each image the pods use pulled
// alone, and a large pull's bandwidth, put together as the pods' critical
// path, their CPU over the cores and their bytes over the bandwidth; each
// mode's p99 is given over it. Each run also reports the CPU it cost the
// node, containerd and its shims, and the orchestrator, and for the agent
// each CRI call's p50 and p99 latency from criclient's observer.
package main
