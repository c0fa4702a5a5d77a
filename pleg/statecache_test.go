package pleg

import (
	"context"
	"testing"
	"time"

	"github.com/syncpod/syncpod/statecache"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"
)

// The #121003 pattern, fixed: a worker that acted on a pod at t waits with
// GetNewerThan(uid, t); nothing older than its action satisfies it (no
// timer advances the global time), and RequestRelist makes the answer come
// at once and include what the worker did.
func TestRequestRelistAnswersGetNewerThan(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	rt.SetFakeSandboxes([]*critest.FakePodSandbox{{PodSandboxStatus: runtimeapi.PodSandboxStatus{
		Id: "s1", State: ready, Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "ns", Uid: "a"}}}})
	cache := statecache.New[types.UID, *PodStatus]()
	clk := testclock.NewFakeClock(t0)
	// The period is far longer than the clock's steps below: a periodic
	// relist woken by a step could otherwise run after the worker's action
	// and answer the first GetNewerThan legitimately.
	p, err := New(rt, cache, WithClock(clk), WithEventStream(false), WithRelistPeriod(time.Hour), WithThreshold(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "first relist", func() bool { return p.Stats().Relists == 1 })

	// The worker starts c1 at t1.
	clk.Step(time.Second)
	rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "s1", ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", State: running, Metadata: &runtimeapi.ContainerMetadata{Name: "c1"}}}})
	t1 := clk.Now()
	clk.Step(time.Millisecond)

	done, cancel := context.WithCancel(context.Background())
	cancel()
	if st, err := cache.GetNewerThan(done, "a", t1); err == nil {
		t.Fatalf("an entry from before the action answered: %+v", st)
	}
	if err := p.RequestRelist("a"); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	st, err := cache.GetNewerThan(ctx, "a", t1)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].Id != "c1" || !st.Timestamp.After(t1) {
		t.Errorf("status %+v, want c1 and a time after %v", st, t1)
	}
}
