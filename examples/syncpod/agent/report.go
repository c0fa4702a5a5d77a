package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/syncpod/syncpod/locks"
	"github.com/syncpod/syncpod/pleg"
	"k8s.io/apimachinery/pkg/types"
)

// Op is the kind of a PodUpdate.
type Op int

// Pod update kinds.
const (
	OpAdd Op = iota + 1
	OpUpdate
	OpDelete
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
	Op     Op
	Pod    *corev1.Pod // for OpDelete, the last known pod (may be nil if UID is set)
	UID    types.UID   // optional for OpDelete
	Source string      // e.g. the manifest file
}

// StaticPodUID derives a stable UID from a pod's namespace and name, so a
// changed manifest updates the same pod (a new name is a new pod).
func StaticPodUID(p *corev1.Pod) types.UID {
	sum := sha256.Sum256([]byte("syncpod/static/" + p.Namespace + "/" + p.Name))
	h := hex.EncodeToString(sum[:16])
	return types.UID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
}

// EventType names what happened.
type EventType string

// Event types delivered to WithEventHook.
const (
	EventAdded      EventType = "Added"
	EventUpdated    EventType = "Updated"
	EventDeleted    EventType = "Deleted"
	EventSandbox    EventType = "SandboxCreated"
	EventStarted    EventType = "ContainerStarted"
	EventStartError EventType = "StartFailed"
	EventKilled     EventType = "PodKilled"
	EventBackOff    EventType = "CrashLoopBackOff"
	EventPulled     EventType = "ImagePulled"
	EventRunning    EventType = "PodRunning"
	EventFinished   EventType = "PodFinished"
	EventHealth     EventType = "PLEGHealth"
	EventSynced     EventType = "Synced"
)

// Event is a notable step, for logs, progress and tests.
type Event struct {
	Time      time.Time
	Type      EventType
	Pod       string // namespace/name
	Container string
	Image     string
	Attempt   uint32
	Duration  time.Duration // startup latency, pull time or back-off wait
	Healthy   bool
	Err       error
}

// Pod states in reports.
const (
	PodPending     = "Pending"
	PodRunning     = "Running"
	PodSucceeded   = "Succeeded"
	PodFailed      = "Failed"
	PodCrashLoop   = "CrashLoopBackOff"
	PodTerminating = "Terminating"
)

// PodReport is one pod's line in the summary.
type PodReport struct {
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	UID       types.UID     `json:"uid"`
	State     string        `json:"state"`
	Startup   time.Duration `json:"startupNanos"` // creation → all containers running and observed; 0 if not yet
	PullWait  time.Duration `json:"pullWaitNanos"`
	Restarts  int           `json:"restarts"`
	Message   string        `json:"message,omitempty"`
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
	startups []time.Duration
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
		return &podRecord{uid: pod.UID, created: now, state: PodPending, pod: pod}
	})
	r.with(rec.uid, func(rec *podRecord) {
		rec.pod = pod
		if rec.state == PodTerminating { // deleted and added again before the kill finished
			*rec = podRecord{uid: rec.uid, created: now, state: PodPending, pod: pod}
		}
	})
}

func (r *podRecords) terminating(uid types.UID) {
	r.update(uid, func(rec *podRecord) { rec.state = PodTerminating })
}

func (r *podRecords) remove(uid types.UID) { r.byUID.Delete(uid) }

func (r *podRecords) update(uid types.UID, f func(*podRecord)) { r.with(uid, f) }

// observe records a sync's view; it returns the startup latency when the
// pod was seen fully running for the first time.
func (r *podRecords) observe(uid types.UID, now time.Time, st *PodStatus, a *podActions) (startup time.Duration, first bool) {
	r.with(uid, func(rec *podRecord) { startup, first = rec.observe(now, st, a) })
	if first {
		r.mu.Lock()
		r.startups = append(r.startups, startup)
		r.mu.Unlock()
	}
	return startup, first
}

func (rec *podRecord) observe(now time.Time, st *PodStatus, a *podActions) (startup time.Duration, first bool) {
	if rec.state == PodTerminating {
		return 0, false
	}
	restarts := 0
	for _, c := range st.latest {
		restarts += int(c.Attempt)
	}
	rec.restarts = restarts
	switch {
	case a.podFailed || (a.finished && !a.succeeded):
		rec.state = PodFailed
	case a.finished:
		rec.state = PodSucceeded
	case len(a.inBackoff) > 0:
		rec.state = PodCrashLoop
	case a.allRunning:
		rec.state = PodRunning
	default:
		if rec.running {
			rec.state = PodRunning
		} else {
			rec.state = PodPending
		}
	}
	if a.allRunning && !rec.running {
		rec.running = true
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

func (r *podRecords) reports() []PodReport {
	out := make([]PodReport, 0, r.byUID.Size())
	r.byUID.Range(func(uid types.UID, _ *podRecord) bool {
		r.with(uid, func(rec *podRecord) {
			out = append(out, PodReport{Namespace: rec.pod.Namespace, Name: rec.pod.Name, UID: rec.uid, State: rec.state,
				Startup: rec.startup, PullWait: rec.pullWait, Restarts: rec.restarts, Message: rec.message})
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

func (r *podRecords) startupLatencies() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.startups...)
}

func (r *podRecords) len() int { return r.byUID.Size() }

// Snapshot is the agent's state for a progress line or a summary.
type Snapshot struct {
	Pods          []PodReport `json:"pods"`
	Running       int         `json:"running"`
	Total         int         `json:"total"`
	PullsInFlight int         `json:"pullsInFlight"`
	PLEGMode      string      `json:"plegMode"`
	PLEGHealthy   bool        `json:"plegHealthy"`
	PLEGMessage   string      `json:"plegMessage,omitempty"`
}

// Snapshot returns the current state.
func (a *Agent) Snapshot() Snapshot {
	s := Snapshot{Pods: a.pods.reports(), PullsInFlight: a.images.inFlight()}
	for _, p := range s.Pods {
		s.Total++
		if p.State == PodRunning || p.State == PodSucceeded {
			s.Running++
		}
	}
	ok, err, mode := a.plegHealth()
	s.PLEGMode, s.PLEGHealthy = mode, ok
	if err != nil {
		s.PLEGMessage = err.Error()
	}
	return s
}

// Stats are the agent's totals, for the benchmark table.
type Stats struct {
	Startups      []time.Duration // every pod startup latency observed, in order
	WorkerBlocked time.Duration   // sum over workers of time blocked in pulls and cache waits
	MaxRelist     time.Duration
	PLEGUnhealthy time.Duration
	Workers       int // live pod workers
	CacheEntries  int // per-pod entries in the agent's maps and caches, the PLEG's status cache included
	// PLEG is the pleg package's counters (syncpod mode only).
	PLEG pleg.Stats
}

// Stats returns the agent's totals so far.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	last := len(a.lastSync) + len(a.expects)
	a.mu.Unlock()
	var ps pleg.Stats
	if a.lifecycle != nil {
		ps = a.lifecycle.p.Stats()
	}
	return Stats{
		PLEG:          ps,
		Startups:      a.pods.startupLatencies(),
		WorkerBlocked: a.blocked.get(),
		MaxRelist:     a.maxRelist(),
		PLEGUnhealthy: a.unhealthy.get(),
		Workers:       a.workers.Len(),
		CacheEntries:  a.pods.len() + last + a.backoff.len() + a.cacheLen(),
	}
}

func (a *Agent) cacheLen() int {
	n := a.cache.(*trackedStore).len()
	if a.lifecycle != nil {
		n += a.lifecycle.keys.len()
	}
	return n
}

// Percentile returns the p-th percentile (0..100) of ds by the
// nearest-rank method, 0 for an empty slice. ds is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(s) {
		rank = len(s)
	}
	return s[rank-1]
}
