package pleg

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/statecache"
	"k8s.io/apimachinery/pkg/types"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"
)

// The runtimes and cache the package is meant for fit its interfaces.
var (
	_ Runtime = (*critest.FakeRuntimeService)(nil)
	_ Runtime = (*criclient.Client)(nil)
	_ Runtime = criapi.RuntimeService(nil)
	_ Cache   = (*statecache.Cache[types.UID, *PodStatus])(nil)
	_ Cache   = (*fakeCache)(nil)
)

// cacheEntry is one fakeCache entry.
type cacheEntry struct {
	status *PodStatus
	err    error
	ts     time.Time
}

// fakeCache is a Cache with the kubelet's semantics (refuses older writes,
// equal overwrites) that remembers every call.
type fakeCache struct {
	mu      sync.Mutex
	entries map[types.UID]cacheEntry
	global  []time.Time
	sets    int
	deletes []types.UID
}

func newFakeCache() *fakeCache { return &fakeCache{entries: map[types.UID]cacheEntry{}} }

func (c *fakeCache) Set(uid types.UID, st *PodStatus, err error, ts time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sets++
	if old, ok := c.entries[uid]; ok && old.ts.After(ts) {
		return false
	}
	c.entries[uid] = cacheEntry{st, err, ts}
	return true
}

func (c *fakeCache) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, uid)
	c.deletes = append(c.deletes, uid)
}

func (c *fakeCache) UpdateTime(ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.global = append(c.global, ts)
}

func (c *fakeCache) get(uid types.UID) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[uid]
	return e, ok
}

func (c *fakeCache) globalTimes() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.global...)
}

// containerStates returns id → state of the cached status of uid.
func (c *fakeCache) containerStates(uid types.UID) map[string]runtimeapi.ContainerState {
	e, ok := c.get(uid)
	if !ok || e.status == nil {
		return nil
	}
	out := map[string]runtimeapi.ContainerState{}
	for _, s := range e.status.ContainerStatuses {
		out[s.Id] = s.State
	}
	return out
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a PLEG over cri-api's fake runtime, with a fake clock; tests
// drive relists directly.
type fixture struct {
	t     *testing.T
	rt    *critest.FakeRuntimeService
	cache *fakeCache
	clock *testclock.FakeClock
	p     *PLEG
}

func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	f := &fixture{t: t, rt: critest.NewFakeRuntimeService(), cache: newFakeCache(), clock: testclock.NewFakeClock(t0)}
	var err error
	f.p, err = New(f.rt, f.cache, append([]Option{WithClock(f.clock), WithEventStream(false)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.p.Close() })
	return f
}

// fc describes a fake container: pod uid, id, state. Containers have no
// sandbox and are attributed by the kubelet's pod uid label, as in the
// kubelet's own PLEG tests.
type fc struct {
	uid   types.UID
	id    string
	state runtimeapi.ContainerState
}

func (f *fixture) setContainers(cs ...fc) {
	var out []*critest.FakeContainer
	for i, c := range cs {
		out = append(out, &critest.FakeContainer{ContainerStatus: runtimeapi.ContainerStatus{
			Id:        c.id,
			Metadata:  &runtimeapi.ContainerMetadata{Name: c.id},
			State:     c.state,
			CreatedAt: int64(i + 1),
			Labels:    map[string]string{labelPodUID: string(c.uid), labelPodName: "pod-" + string(c.uid), labelPodNamespace: "ns"},
		}})
	}
	f.rt.SetFakeContainers(out)
}

type fsb struct {
	uid   types.UID
	id    string
	state runtimeapi.PodSandboxState
}

func (f *fixture) setSandboxes(sbs ...fsb) {
	var out []*critest.FakePodSandbox
	for i, s := range sbs {
		out = append(out, &critest.FakePodSandbox{PodSandboxStatus: runtimeapi.PodSandboxStatus{
			Id:        s.id,
			Metadata:  &runtimeapi.PodSandboxMetadata{Name: "pod-" + string(s.uid), Namespace: "ns", Uid: string(s.uid)},
			State:     s.state,
			CreatedAt: int64(i + 1),
		}})
	}
	f.rt.SetFakeSandboxes(out)
}

func (f *fixture) relist() {
	f.t.Helper()
	if err := f.p.relist(context.Background()); err != nil {
		f.t.Fatalf("relist: %v", err)
	}
}

// drain returns the events waiting on the channel, sorted.
func drain(p *PLEG) []Event {
	var out []Event
	for {
		select {
		case ev, ok := <-p.Watch():
			if !ok {
				return sortEvents(out)
			}
			out = append(out, ev)
		default:
			return sortEvents(out)
		}
	}
}

func sortEvents(evs []Event) []Event {
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].ID != evs[j].ID {
			return evs[i].ID < evs[j].ID
		}
		if evs[i].Data != evs[j].Data {
			return evs[i].Data < evs[j].Data
		}
		return false
	})
	return evs
}

func ev(uid types.UID, typ EventType, id string) Event { return Event{ID: uid, Type: typ, Data: id} }

func assertEvents(t *testing.T, got []Event, want ...Event) {
	t.Helper()
	want = sortEvents(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events:\n got  %v\n want %v", got, want)
	}
}

// hookRuntime wraps a Runtime and runs hooks before calls.
type hookRuntime struct {
	Runtime
	mu     sync.Mutex
	before map[string]func()
	events func(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

func (h *hookRuntime) hook(method string) {
	h.mu.Lock()
	fn := h.before[method]
	h.mu.Unlock()
	if fn != nil {
		fn()
	}
}

func (h *hookRuntime) setHook(method string, fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.before == nil {
		h.before = map[string]func(){}
	}
	h.before[method] = fn
}

func (h *hookRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	h.hook("ListPodSandbox")
	return h.Runtime.ListPodSandbox(ctx, f)
}

func (h *hookRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	h.hook("ListContainers")
	return h.Runtime.ListContainers(ctx, f)
}

func (h *hookRuntime) ContainerStatus(ctx context.Context, id string, v bool) (*runtimeapi.ContainerStatusResponse, error) {
	h.hook("ContainerStatus")
	return h.Runtime.ContainerStatus(ctx, id, v)
}

func (h *hookRuntime) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	if h.events != nil {
		return h.events(ctx, ch, cb)
	}
	return h.Runtime.GetContainerEvents(ctx, ch, cb)
}

// eventSource is a scriptable event stream: every GetContainerEvents call
// is one connection that delivers what the test sends until the test cuts it.
type eventSource struct {
	conns chan *eventConn
}

type eventConn struct {
	events chan *runtimeapi.ContainerEventResponse
	cut    chan error
}

func newEventSource() *eventSource { return &eventSource{conns: make(chan *eventConn, 16)} }

func (s *eventSource) run(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	c := &eventConn{events: make(chan *runtimeapi.ContainerEventResponse), cut: make(chan error, 1)}
	cb(nil)
	select {
	case s.conns <- c:
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		select {
		case e := <-c.events:
			select {
			case ch <- e:
			case <-ctx.Done():
				return ctx.Err()
			}
		case err := <-c.cut:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// next waits for the next connection.
func (s *eventSource) next(t *testing.T) *eventConn {
	t.Helper()
	select {
	case c := <-s.conns:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no event stream connection")
		return nil
	}
}

var errCut = errors.New("stream cut by test")

// waitFor polls cond (no timing assertion: the deadline only bounds a hang).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// containerEvent builds a runtime event.
func containerEvent(typ runtimeapi.ContainerEventType, id string, at time.Time, sb *runtimeapi.PodSandboxStatus, cs ...*runtimeapi.ContainerStatus) *runtimeapi.ContainerEventResponse {
	return &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: typ, CreatedAt: at.UnixNano(), PodSandboxStatus: sb, ContainersStatuses: cs}
}

func sbStatus(uid types.UID, id string, st runtimeapi.PodSandboxState) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{Id: id, State: st, Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod-" + string(uid), Namespace: "ns", Uid: string(uid)}}
}

func ctrStatus(id string, st runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{Id: id, State: st, Metadata: &runtimeapi.ContainerMetadata{Name: id}}
}

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
	ready   = runtimeapi.PodSandboxState_SANDBOX_READY
	notrdy  = runtimeapi.PodSandboxState_SANDBOX_NOTREADY

	evCreated = runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
	evStarted = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
	evStopped = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
	evDeleted = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
)
