package baseline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/examples/syncpod/agent/baseline"
)

// fakePod records each step a sync takes.
type fakePod struct {
	plan    baseline.Plan
	done    bool
	failOn  string // the step that fails
	since   time.Time
	steps   []string
	requeue time.Duration
}

func (f *fakePod) step(s string) error {
	f.steps = append(f.steps, s)
	if s == f.failOn {
		return errors.New(s + " failed")
	}
	return nil
}

func (f *fakePod) WaitStatus(_ context.Context, since time.Time) error {
	f.since = since
	return f.step("wait")
}
func (f *fakePod) Plan(context.Context) (baseline.Plan, bool, error) {
	return f.plan, f.done, f.step("plan")
}
func (f *fakePod) CreateSandbox(context.Context) error { return f.step("sandbox") }
func (f *fakePod) Kill(context.Context) error          { return f.step("kill") }
func (f *fakePod) Pull(_ context.Context, s baseline.Step) error {
	return f.step(fmt.Sprintf("pull %v/%d", s.Init, s.Index))
}
func (f *fakePod) Start(_ context.Context, s baseline.Step) error {
	return f.step(fmt.Sprintf("start %v/%d", s.Init, s.Index))
}
func (f *fakePod) Done(_ context.Context, err error) time.Duration {
	f.steps = append(f.steps, fmt.Sprintf("done %v", err != nil))
	return f.requeue
}

func TestSyncOrder(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	s := baseline.New(clk)
	ctx := context.Background()
	cases := []struct {
		name string
		pod  fakePod
		want []string
	}{
		{"init chain: only the first init container", fakePod{plan: baseline.Plan{CreateSandbox: true, Init: 2, Start: 3}},
			[]string{"wait", "plan", "sandbox", "kill", "pull true/0", "start true/0", "done false"}},
		{"regular containers one after another", fakePod{plan: baseline.Plan{Start: 2}},
			[]string{"wait", "plan", "kill", "pull false/0", "start false/0", "pull false/1", "start false/1", "done false"}},
		{"a failed pull skips that start only", fakePod{plan: baseline.Plan{Start: 2}, failOn: "pull false/0"},
			[]string{"wait", "plan", "kill", "pull false/0", "pull false/1", "start false/1", "done true"}},
		{"a failed sandbox ends the sync", fakePod{plan: baseline.Plan{CreateSandbox: true, Start: 1}, failOn: "sandbox"},
			[]string{"wait", "plan", "sandbox"}},
		{"done at the plan", fakePod{plan: baseline.Plan{Start: 1}, done: true},
			[]string{"wait", "plan"}},
		{"a failed wait ends the sync", fakePod{failOn: "wait"}, []string{"wait"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.pod
			p.requeue = time.Minute
			d, err := s.Sync(ctx, "u", &p)
			if !slices.Equal(p.steps, c.want) {
				t.Fatalf("steps %q, want %q", p.steps, c.want)
			}
			if (err != nil) != (p.failOn != "") {
				t.Fatalf("err %v with failOn %q", err, p.failOn)
			}
			if last := c.want[len(c.want)-1]; (last == "done false" || last == "done true") != (d == time.Minute) {
				t.Fatalf("requeue %v after %q", d, last)
			}
		})
	}
}

// Each sync waits for a status newer than the end of the pod's previous
// sync; Forget drops that record.
func TestSyncWaitsForNewerStatus(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	s := baseline.New(clk)
	p := &fakePod{}
	if _, err := s.Sync(context.Background(), "u", p); err != nil {
		t.Fatal(err)
	}
	if !p.since.IsZero() || s.Len() != 1 {
		t.Fatalf("first sync waited for %v, Len %d", p.since, s.Len())
	}
	end := clk.Now()
	clk.Step(time.Second)
	if _, err := s.Sync(context.Background(), "u", p); err != nil {
		t.Fatal(err)
	}
	if !p.since.Equal(end) {
		t.Fatalf("second sync waited for a status newer than %v, want %v", p.since, end)
	}
	s.Forget("u")
	if s.Len() != 0 {
		t.Fatalf("Len %d after Forget", s.Len())
	}
}

// A cancelled sync records nothing.
func TestCancelledSync(t *testing.T) {
	s := baseline.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Sync(ctx, "u", &fakePod{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if s.Len() != 0 {
		t.Fatalf("Len %d after a cancelled sync", s.Len())
	}
}
