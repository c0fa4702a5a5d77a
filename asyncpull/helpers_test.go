package asyncpull_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/asyncpull"
)

// pullCall is one PullImage call held by a gated testImages until the test replies.
type pullCall struct {
	Image string
	Auth  *runtimeapi.AuthConfig
	ctx   context.Context
	reply chan error
}

// release lets the call succeed (err == nil) or fail with err.
func (c *pullCall) release(err error) { c.reply <- err }

// testImages is an ImageService that counts calls and in-flight pulls (node-wide and per
// registry) and, when gated, holds each PullImage until the test releases it.
type testImages struct {
	gated bool
	calls chan *pullCall

	mu          sync.Mutex
	present     map[string]bool
	pulls       []string
	auths       []*runtimeapi.AuthConfig
	statusCalls int
	inFlight    int
	maxInFlight int
	regInFlight map[string]int
	regMax      map[string]int
	fail        map[string]error // non-gated: PullImage of image fails with this
	statusErr   error
	size        uint64
}

var _ asyncpull.ImageService = (*testImages)(nil)

func newTestImages(gated bool) *testImages {
	return &testImages{
		gated: gated, calls: make(chan *pullCall, 1000),
		present: map[string]bool{}, regInFlight: map[string]int{}, regMax: map[string]int{},
		fail: map[string]error{}, size: 1000,
	}
}

func registryOf(image string) string {
	n, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return ""
	}
	return reference.Domain(n)
}

func (t *testImages) ImageStatus(_ context.Context, spec *runtimeapi.ImageSpec, _ bool) (*runtimeapi.ImageStatusResponse, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.statusCalls++
	if t.statusErr != nil {
		return nil, t.statusErr
	}
	img := spec.GetImage()
	if t.present[img] {
		return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "id-" + trimID(img), RepoTags: []string{img}, Size: t.size}}, nil
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

func trimID(s string) string {
	if len(s) > 3 && s[:3] == "id-" {
		return s[3:]
	}
	return s
}

func (t *testImages) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	img := spec.GetImage()
	reg := registryOf(img)
	t.mu.Lock()
	t.pulls = append(t.pulls, img)
	t.auths = append(t.auths, auth)
	t.inFlight++
	t.maxInFlight = max(t.maxInFlight, t.inFlight)
	t.regInFlight[reg]++
	t.regMax[reg] = max(t.regMax[reg], t.regInFlight[reg])
	failErr := t.fail[img]
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.inFlight--
		t.regInFlight[reg]--
		t.mu.Unlock()
	}()
	if t.gated {
		c := &pullCall{Image: img, Auth: auth, ctx: ctx, reply: make(chan error, 1)}
		t.calls <- c
		select {
		case err := <-c.reply:
			failErr = err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if failErr != nil {
		return "", failErr
	}
	t.mu.Lock()
	t.present[img] = true
	t.present["id-"+img] = true
	t.mu.Unlock()
	return "id-" + img, nil
}

func (t *testImages) setPresent(images ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, img := range images {
		t.present[img] = true
		t.present["id-"+img] = true
	}
}

func (t *testImages) pullCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pulls)
}

func (t *testImages) pulled() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.pulls...)
}

func (t *testImages) setFail(image string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		delete(t.fail, image)
	} else {
		t.fail[image] = err
	}
}

// nextCall returns the next gated PullImage call, failing the test if none comes.
func (t *testImages) nextCall(tb testing.TB) *pullCall {
	tb.Helper()
	select {
	case c := <-t.calls:
		return c
	case <-time.After(20 * time.Second):
		tb.Fatalf("no PullImage call arrived")
		return nil
	}
}

// noCall asserts that no gated call is waiting after the scheduler has settled.
func (t *testImages) noCall(tb testing.TB) {
	tb.Helper()
	select {
	case c := <-t.calls:
		tb.Fatalf("unexpected PullImage(%s)", c.Image)
	default:
	}
}

// eventually polls cond until it holds (synchronisation only: no assertion on duration).
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// eventRecorder collects observer events.
type eventRecorder struct {
	mu     sync.Mutex
	events []asyncpull.Event
}

func (r *eventRecorder) observe(e asyncpull.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *eventRecorder) all() []asyncpull.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]asyncpull.Event(nil), r.events...)
}

func (r *eventRecorder) count(k asyncpull.EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func (r *eventRecorder) of(k asyncpull.EventKind) []asyncpull.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []asyncpull.Event
	for _, e := range r.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

func img(i int) string { return fmt.Sprintf("registry.example/app%d:v1", i) }

func asyncpullUID(s string) types.UID { return types.UID(s) }

// newScheduler is New for tests whose options are valid.
func newScheduler(images asyncpull.ImageService, opts ...asyncpull.Option) *asyncpull.Scheduler {
	s, err := asyncpull.New(images, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

func mustSub(sub *asyncpull.Subscription, err error) *asyncpull.Subscription {
	if err != nil {
		panic(err)
	}
	return sub
}
