// Package concurrentstart runs start functions as a dependency graph:
// ordering where it is required, concurrency everywhere else. It is the
// container-start core of a kubelet-like agent, but knows nothing of
// Kubernetes: a node is any named function. Package
// concurrentstart/podplan builds the graph for a pod.
//
// # Use
//
//	plan, err := concurrentstart.New([]concurrentstart.Node{
//		{Name: "init", Start: startInit, Complete: waitExit0},
//		{Name: "proxy", Start: startProxy, Ready: waitStartupProbe,
//			DependsOn: []concurrentstart.Dependency{concurrentstart.AfterCompleted("init")}},
//		{Name: "app", Start: startApp,
//			DependsOn: []concurrentstart.Dependency{concurrentstart.AfterReady("proxy")}},
//	}, concurrentstart.WithMaxParallel(8))
//	if err != nil { ... } // typed: *CycleError, *UnknownDependencyError, ...
//	report, err := plan.Run(ctx)
//	for _, r := range report.Results { ... r.Outcome, r.Err, r.Reason, r.StartTime ... }
//
// # Nodes and edges
//
// A node passes up to three conditions, in order: Started (its Start
// returned nil), Ready (its optional Ready returned nil) and Completed (its
// optional Complete returned nil). A missing function is passed at once, so a
// node with only Start is Ready and Completed when Start returns. An edge
// (Dependency) waits for one condition of another node: AfterStarted,
// AfterReady, AfterCompleted. For containers: Start creates and starts the
// container, Ready waits for its startup probe, Complete waits for it to
// exit 0.
//
// New and Validate reject bad graphs with typed errors, all matching
// ErrInvalidPlan: *InvalidNodeError (empty name, nil Start),
// *DuplicateNodeError, *UnknownDependencyError, *InvalidDependencyError and
// *CycleError, whose Path names the cycle ("a" -> "b" -> "c" -> "a", each
// depending on the next). Structural errors are all reported at once
// (errors.Join); cycles are looked for only in a structurally valid graph.
//
// # Running
//
// Run calls Start for each node whose edges are met, at most
// WithMaxParallel at a time; runnable nodes wait for a slot first come,
// first served (in plan order among nodes that became runnable together).
// The bound counts only Start functions: Ready and Complete are waits, run in
// the node's goroutine without a slot, so a long init container or a slow
// probe never holds back unrelated starts. Goroutines exist only for nodes
// that have been started; nodes waiting for a dependency or a slot cost none.
//
// An edge is met the moment its condition is reached; a dependency failing
// later (say its readiness check) does not undo it. When a node fails:
//
//   - ContinueIndependent (default, like the kubelet's container loop): nodes
//     whose unmet edges lead to the failed node are Skipped, transitively,
//     with Cause naming it and Reason saying the path; all others run.
//   - FailFast: nothing more is started; every node not yet started is
//     Skipped with the failed node as Cause; the context of in-flight
//     functions is canceled with a cause naming the failed node
//     (context.Cause), and those that then return an error are Canceled.
//
// When ctx is done, Run starts nothing more, marks every node not yet
// started Canceled at once, and returns as soon as in-flight functions
// return (they see ctx canceled). Run never leaves a goroutine behind and
// never calls a node function or observer after it returns. Run does not
// recover a panic in a node function or observer (errgroup's reasoning: it
// is the caller's bug, and recovering it hides its stack): it crashes the
// program from the node's goroutine, or unwinds through Run when it happens
// in the goroutine calling Run.
//
// Each Result has the Outcome (Succeeded, Failed, Skipped, Canceled), the
// error, the last condition Reached, why it was skipped, and StartTime and
// EndTime from the clock given by WithClock (k8s.io/utils/clock). Run's
// error is nil if every node succeeded, else a *RunError listing the nodes
// by outcome that unwraps to a *NodeError per failure (and to the context's
// cause), so errors.Is and errors.As work on it.
//
// An observer set with WithObserver is told of each node starting and
// finishing (Event), synchronously, from node goroutines (and, for nodes
// that never started, from the goroutine calling Run), so it must be safe
// for concurrent use.
//
// Options follow one shape (type Option func(*config)); a bad one makes New
// return a *ConfigError, which does not match ErrInvalidPlan.
// WithMaxParallel(0), the default, is unlimited. A nil ctx given to Run is
// an *ArgError.
//
// A Plan is immutable: Run may be called again, even concurrently; each call
// runs every function afresh.
//
// # Design notes
//
// All scheduling state lives in one loop on the goroutine calling Run; node
// goroutines report each condition reached over a channel, so there are no
// locks and no shared state to race on. The parallelism bound is a counter
// in that loop rather than golang.org/x/sync/semaphore: a semaphore would
// need a goroutine parked per runnable node, and errgroup's cancel-on-first
// error and lack of per-task results fit neither failure policy. Run's
// overhead is under a microsecond per node (concurrentstart/benchmarks.txt).
//
// # Compared with the kubelet
//
// The kubelet starts a pod's regular containers one after another, each
// with its own image check, CreateContainer, StartContainer and PostStart
// hook, and advances an init/sidecar chain by one step per sync, usually
// waiting a PLEG relist in between. With concurrentstart the init chain
// proceeds as soon as each step's condition holds, and the regular
// containers start together: a pod's start costs about its critical path
// (init chain plus the slowest container) instead of the sum of all
// containers. It also adds what users have asked for (kubernetes#65502):
// ordering between regular containers, validated like any other edge.
package concurrentstart
