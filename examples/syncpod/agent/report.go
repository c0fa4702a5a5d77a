package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
	"github.com/syncpod/syncpod/locks"
	"github.com/syncpod/syncpod/pleg"
)

// Op is the kind of a PodUpdate.
type Op int

// Pod update kinds.
const (
	OpAdd    Op = iota + 1 // a new pod
	OpUpdate               // a changed pod
	OpDelete               // a pod to kill and forget
)

// String implements fmt.Stringer.
func (o Op) String() string {
	switch o {
	case OpAdd:
		return "Added"
	case OpUpdate:
		return "Updated"
	case OpDelete:
		return "Deleted"
	}
	return "Unknown"
}

// PodUpdate is one desired-state change: a pod added, changed or deleted.
type PodUpdate struct {
	Op     Op          // what happened to the pod
	Pod    *corev1.Pod // the desired pod; for OpDelete, the last known pod (may be nil if UID is set), whose DeletionGracePeriodSeconds, when set, shortens the kill
	UID    types.UID   // optional for OpDelete
	Source string      // where the update came from, e.g. the manifest file
}

// StaticPodUID derives a stable UID from a pod's namespace and name, so a
// changed manifest updates the same pod (a new name is a new pod).
func StaticPodUID(p *corev1.Pod) types.UID {
	sum := sha256.Sum256([]byte("syncpod/static/" + p.Namespace + "/" + p.Name))
	h := hex.EncodeToString(sum[:16])
	return types.UID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
}

// Event types (Event.Type).
const (
	eventAdded      = "Added"            // Apply got an OpAdd
	eventUpdated    = "Updated"          // Apply got an OpUpdate
	eventDeleted    = "Deleted"          // Apply got an OpDelete
	eventSandbox    = "SandboxCreated"   // a pod sandbox was created (Attempt is its attempt)
	eventStarted    = "ContainerStarted" // a container was started (Attempt is its attempt)
	eventStartError = "StartFailed"      // creating or starting a container failed (Err)
	eventKilled     = "PodKilled"        // a deleted pod was removed from the runtime
	eventBackOff    = "CrashLoopBackOff" // a container waits out its crash-loop back-off (Duration left)
	eventPulled     = "ImagePulled"      // a pull ended (Duration, Err)
	eventRunning    = "PodRunning"       // a pod was first seen with every container running (Duration: startup)
	eventFinished   = "PodFinished"      // a pod reached Succeeded or Failed
	eventHealth     = "PLEGHealth"       // PLEG health changed (Healthy, Err)
	eventSynced     = "Synced"           // a pod sync ended (Err)
)

// Event is a notable step, for logs, progress and tests, delivered to
// WithEventHook. Type is one of "Added", "Updated", "Deleted" (Apply got
// the update), "SandboxCreated", "ContainerStarted" (Attempt is the
// attempt), "StartFailed" (Err), "Killing" (a container of a kept pod is
// stopped), "PodKilled" (a deleted pod is gone from the runtime),
// "CrashLoopBackOff" (Duration: the wait left), "ImagePulled" (Duration,
// Err), "PodRunning" (first seen with every container running; Duration:
// the startup), "PodFinished", "Unhealthy" (a probe failed),
// "FailedPostStartHook", "FailedPreStopHook", "PLEGHealth" (Healthy, Err)
// and "Synced" (a pod sync ended; Err).
type Event struct {
	Time      time.Time     // when it happened, on the agent's clock
	Type      string        // what happened: see Event
	Pod       string        // namespace/name
	Container string        // the container's name, for container events
	Image     string        // the image, for ImagePulled
	Attempt   uint32        // the container's or sandbox's attempt
	Duration  time.Duration // startup latency, pull time or back-off wait
	Healthy   bool          // the PLEG's health, for PLEGHealth
	Err       error         // what failed, if anything
}

// Pod states in reports.
const (
	reportPending     = "Pending"          // not every container running yet
	reportRunning     = "Running"          // every container running (or was, and restarts)
	reportSucceeded   = "Succeeded"        // finished, every container exited 0
	reportFailed      = "Failed"           // finished with a failure
	reportCrashLoop   = "CrashLoopBackOff" // a container waits out its crash-loop back-off
	reportTerminating = "Terminating"      // deleted, being removed from the runtime
)

// PodReport is one pod's line in the summary.
type PodReport struct {
	Namespace string        `json:"namespace"`         // the pod's namespace
	Name      string        `json:"name"`              // the pod's name
	UID       types.UID     `json:"uid"`               // the pod's UID (StaticPodUID when the manifest has none)
	State     string        `json:"state"`             // Pending, Running, Succeeded, Failed, CrashLoopBackOff or Terminating
	Startup   time.Duration `json:"startupNanos"`      // creation → all containers running and observed; 0 if not yet
	PullWait  time.Duration `json:"pullWaitNanos"`     // time the pod waited for its images
	Restarts  int           `json:"restarts"`          // container restarts, summed over containers
	Message   string        `json:"message,omitempty"` // the last sync or pull error, if any
	// Adopted says the pod was already running, from an earlier run of the
	// agent, when this agent first saw it: it has no Startup, and its
	// start is the sandbox's creation (StartedAt).
	Adopted   bool      `json:"adopted,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"` // when the pod's sandbox was created, once it has run
}

type podRecord struct {
	uid          types.UID
	pod          *corev1.Pod
	created      time.Time
	startup      time.Duration
	running      bool
	pullWait     time.Duration
	waitingSince time.Time
	restarts     int
	state        string
	message      string
	adopted      bool
	ownSandbox   string // the sandbox this agent created for the pod, if any
	startedAt    time.Time

	// What the reported corev1.PodStatus needs beyond the runtime's view.
	waiting     map[string]podcri.Waiting              // why a container waits, by name
	waitingAt   map[string]time.Time                   // since when, by name
	podWaiting  *podcri.Waiting                        // a pod-level failure (the sandbox)
	lastExited  map[string]*runtimeapi.ContainerStatus // newest exited instance seen, by name
	seenAttempt map[string]uint32                      // highest attempt seen, by name
	published   *corev1.PodStatus                      // the status last given to the status hook
	deleting    *corev1.Pod                            // the pod as deleted (its deletion timestamp)
	final       bool                                   // the terminal status is made: report nothing more
}

// podRecords holds per-pod reporting state plus the startup latencies of
// every pod that ever started (kept after the pod is gone, for percentiles).
// Records live in a concurrent map and each is changed under its own key of
// a locks.KeyedMutex, so workers of different pods never contend and a
// progress reader never stops them all (the kubelet's status manager takes
// one lock for every pod).
type podRecords struct {
	keys  *locks.KeyedMutex[types.UID]
	byUID *xsync.MapOf[types.UID, *podRecord]

	mu       sync.Mutex
	startups startupRing
}

// startupWindow is how many of the latest pod startup latencies an agent
// keeps for Stats: a long-lived agent holds a bounded record, and
// percentiles describe its recent past.
const startupWindow = 1024

// startupRing keeps the latest startupWindow startups and counts them all.
type startupRing struct {
	buf   []time.Duration
	next  int // where the next one goes once buf is full
	total int
}

func (r *startupRing) add(d time.Duration) {
	r.total++
	if len(r.buf) < startupWindow {
		r.buf = append(r.buf, d)
		return
	}
	r.buf[r.next] = d
	r.next = (r.next + 1) % startupWindow
}

// ordered returns the kept startups, oldest first.
func (r *startupRing) ordered() []time.Duration {
	out := make([]time.Duration, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

func newPodRecords() *podRecords {
	return &podRecords{keys: locks.NewKeyedMutex[types.UID](), byUID: xsync.NewMapOf[types.UID, *podRecord]()}
}

// with runs f on uid's record under uid's lock; false if there is none.
func (r *podRecords) with(uid types.UID, f func(*podRecord)) bool {
	rec, ok := r.byUID.Load(uid)
	if !ok {
		return false
	}
	_ = r.keys.Lock(context.Background(), uid) // a Background Lock cannot fail
	defer func() { _ = r.keys.Unlock(uid) }()
	f(rec)
	return true
}

func (r *podRecords) desire(pod *corev1.Pod, now time.Time, added bool) {
	rec, _ := r.byUID.LoadOrCompute(pod.UID, func() *podRecord {
		return &podRecord{uid: pod.UID, created: now, state: reportPending, pod: pod}
	})
	r.with(rec.uid, func(rec *podRecord) {
		rec.pod = pod
		if rec.state == reportTerminating { // deleted and added again before the kill finished
			*rec = podRecord{uid: rec.uid, created: now, state: reportPending, pod: pod}
		}
	})
}

func (r *podRecords) terminating(uid types.UID) {
	r.update(uid, func(rec *podRecord) { rec.state = reportTerminating })
}

func (r *podRecords) remove(uid types.UID) { r.byUID.Delete(uid) }

func (r *podRecords) update(uid types.UID, f func(*podRecord)) { r.with(uid, f) }

// observe records a sync's view; it returns the startup latency when the
// pod was seen fully running for the first time.
func (r *podRecords) observe(uid types.UID, now time.Time, st *runtimePodStatus, a *podActions) (startup time.Duration, first bool) {
	r.with(uid, func(rec *podRecord) { startup, first = rec.observe(now, st, a) })
	if first {
		r.mu.Lock()
		r.startups.add(startup)
		r.mu.Unlock()
	}
	return startup, first
}

func (rec *podRecord) observe(now time.Time, st *runtimePodStatus, a *podActions) (startup time.Duration, first bool) {
	if rec.state == reportTerminating {
		return 0, false
	}
	for _, c := range st.Containers {
		if c.Runtime != nil {
			rec.rememberExit(c.Runtime) // attempts and exits outlive the sandbox
		}
	}
	restarts := 0
	for _, c := range st.latest {
		restarts += int(c.Attempt)
	}
	rec.restarts = restarts
	switch {
	case a.podFailed || (a.finished && !a.succeeded):
		rec.state = reportFailed
	case a.finished:
		rec.state = reportSucceeded
	case len(a.inBackoff) > 0:
		rec.state = reportCrashLoop
	case a.allRunning:
		rec.state = reportRunning
	default:
		if rec.running {
			rec.state = reportRunning
		} else {
			rec.state = reportPending
		}
	}
	if a.allRunning && !rec.running {
		rec.running = true
		rec.startedAt = st.SandboxCreated
		if st.SandboxID != rec.ownSandbox {
			// Running in a sandbox this agent did not create: adopted
			// from an earlier run, with no startup of ours to measure.
			rec.adopted = true
			return 0, false
		}
		rec.startup = now.Sub(rec.created)
		return rec.startup, true
	}
	return 0, false
}

func (r *podRecords) pullWaiting(uid types.UID, now time.Time, waiting bool) {
	r.update(uid, func(rec *podRecord) {
		switch {
		case waiting && rec.waitingSince.IsZero():
			rec.waitingSince = now
		case !waiting && !rec.waitingSince.IsZero():
			rec.pullWait += now.Sub(rec.waitingSince)
			rec.waitingSince = time.Time{}
		}
	})
}

func (r *podRecords) addPullWait(uid types.UID, d time.Duration) {
	r.update(uid, func(rec *podRecord) { rec.pullWait += d })
}

func (r *podRecords) setMessage(uid types.UID, msg string) {
	r.update(uid, func(rec *podRecord) { rec.message = msg })
}

// setWaiting records why container name of pod uid waits.
func (r *podRecords) setWaiting(uid types.UID, name string, w podcri.Waiting, now time.Time) {
	r.update(uid, func(rec *podRecord) { rec.setWaiting(name, w, now) })
}

func (rec *podRecord) setWaiting(name string, w podcri.Waiting, now time.Time) {
	if rec.waiting == nil {
		rec.waiting, rec.waitingAt = map[string]podcri.Waiting{}, map[string]time.Time{}
	}
	if old, ok := rec.waiting[name]; !ok || old.Reason != w.Reason {
		rec.waitingAt[name] = now
	}
	rec.waiting[name] = w
}

// clearWaiting forgets why container name waits: any reason, or only
// those listed.
func (r *podRecords) clearWaiting(uid types.UID, name string, only ...string) {
	r.update(uid, func(rec *podRecord) {
		w, ok := rec.waiting[name]
		if !ok {
			return
		}
		if len(only) == 0 || slices.Contains(only, w.Reason) {
			delete(rec.waiting, name)
		}
	})
}

// setPodWaiting records the pod-level failure, nil when there is none.
func (r *podRecords) setPodWaiting(uid types.UID, w *podcri.Waiting) {
	r.update(uid, func(rec *podRecord) { rec.podWaiting = w })
}

func (r *podRecords) reports() []PodReport {
	out := make([]PodReport, 0, r.byUID.Size())
	r.byUID.Range(func(uid types.UID, _ *podRecord) bool {
		r.with(uid, func(rec *podRecord) {
			out = append(out, PodReport{Namespace: rec.pod.Namespace, Name: rec.pod.Name, UID: rec.uid, State: rec.state,
				Startup: rec.startup, PullWait: rec.pullWait, Restarts: rec.restarts, Message: rec.message,
				Adopted: rec.adopted, StartedAt: rec.startedAt})
		})
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (r *podRecords) startupLatencies() ([]time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.startups.ordered(), r.startups.total
}

func (r *podRecords) len() int { return r.byUID.Size() }

// Snapshot is the agent's state for a progress line or a summary.
type Snapshot struct {
	Pods          []PodReport `json:"pods"`                  // every known pod, by namespace/name
	Running       int         `json:"running"`               // pods Running or Succeeded
	Total         int         `json:"total"`                 // len(Pods)
	PullsInFlight int         `json:"pullsInFlight"`         // image pulls running or queued
	PLEGMode      string      `json:"plegMode"`              // "relist", or the pleg package's mode
	PLEGHealthy   bool        `json:"plegHealthy"`           // the PLEG's health, as the kubelet's
	PLEGMessage   string      `json:"plegMessage,omitempty"` // why it is unhealthy
	// RuntimeHealthy is the runtime check's verdict (see Agent.Healthy),
	// RuntimeMessage why it failed.
	RuntimeHealthy bool   `json:"runtimeHealthy"`
	RuntimeMessage string `json:"runtimeMessage,omitempty"`
}

// Snapshot returns the current state.
func (a *Agent) Snapshot() Snapshot {
	s := Snapshot{Pods: a.pods.reports(), PullsInFlight: a.images.inFlight()}
	for _, p := range s.Pods {
		s.Total++
		if p.State == reportRunning || p.State == reportSucceeded {
			s.Running++
		}
	}
	ok, err, mode := a.plegHealth()
	s.PLEGMode, s.PLEGHealthy = mode, ok
	if err != nil {
		s.PLEGMessage = err.Error()
	}
	s.RuntimeHealthy = true
	if err := a.runtimeDown(); err != nil {
		s.RuntimeHealthy, s.RuntimeMessage = false, err.Error()
	}
	return s
}

// Stats are the agent's totals, for the benchmark table.
type Stats struct {
	Startups      []time.Duration // the latest 1024 pod startup latencies, oldest first
	StartupsTotal int             // every pod startup observed
	WorkerBlocked time.Duration   // sum over workers of time blocked in pulls and cache waits
	MaxRelist     time.Duration   // the longest relist
	PLEGUnhealthy time.Duration   // time the PLEG reported unhealthy, after its first success
	Workers       int             // live pod workers
	CacheEntries  int             // per-pod entries in the agent's maps and caches, the PLEG's status cache included
	// PLEG is the pleg package's counters (syncpod mode only).
	PLEG pleg.Stats
}

// Stats returns the agent's totals so far.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	last := a.mode.len() + len(a.expects) + a.readds.len()
	a.mu.Unlock()
	ps, _ := a.source.stats()
	startups, total := a.pods.startupLatencies()
	return Stats{
		PLEG:          ps,
		Startups:      startups,
		StartupsTotal: total,
		WorkerBlocked: a.blocked.get(),
		MaxRelist:     a.maxRelist(),
		PLEGUnhealthy: a.unhealthy.get(),
		Workers:       a.liveWorkers(),
		CacheEntries:  a.pods.len() + last + a.backoff.len() + a.cacheLen(),
	}
}

func (a *Agent) cacheLen() int {
	_, keys := a.source.stats()
	return a.cache.(*trackedStore).len() + keys
}

// podKey is the pod's namespace/name, "" for a pod without a name.
func podKey(p *corev1.Pod) string {
	if p.Name == "" {
		return ""
	}
	return p.Namespace + "/" + p.Name
}
