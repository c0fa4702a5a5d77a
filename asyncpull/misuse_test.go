package asyncpull_test

import (
	"context"
	"errors"
	"testing"
	"time"

	critest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/asyncpull"
)

// Bad input gets a clear typed error, and a failing image service fails the pull, never the
// process.
func TestMisuse(t *testing.T) {
	var typedNil *critest.FakeImageService
	var ce *asyncpull.ConfigError
	for name, images := range map[string]asyncpull.ImageService{"nil": nil, "typed nil": typedNil} {
		if _, err := asyncpull.New(images); !errors.As(err, &ce) || ce.Option != "images" {
			t.Errorf("New(%s images) = %v, want *ConfigError for images", name, err)
		}
	}
	var nilClock *clock.RealClock
	for name, opt := range map[string]asyncpull.Option{
		"negative MaxParallel":      asyncpull.WithMaxParallel(-1),
		"negative per registry":     asyncpull.WithMaxParallelPerRegistry(-2),
		"negative registry limit":   asyncpull.WithRegistryLimit("docker.io", -1),
		"empty registry domain":     asyncpull.WithRegistryLimit("", 1),
		"negative QPS":              asyncpull.WithQPS(-1, 10),
		"zero burst while pacing":   asyncpull.WithQPS(5, 0),
		"negative large threshold":  asyncpull.WithLargeImageLimit(-1, 1),
		"zero large slots":          asyncpull.WithLargeImageLimit(1<<30, 0),
		"negative pull timeout":     asyncpull.WithPullTimeout(-time.Second),
		"negative back-off":         asyncpull.WithBackOff(-time.Second, time.Minute),
		"back-off max below init":   asyncpull.WithBackOff(time.Minute, time.Second),
		"negative present TTL":      asyncpull.WithPresentTTL(-time.Second),
		"nil clock":                 asyncpull.WithClock(nil),
		"typed-nil clock":           asyncpull.WithClock(nilClock),
		"nil queue policy":          asyncpull.WithQueuePolicy(nil),
		"unknown credential policy": asyncpull.WithCredentialPolicy(7),
	} {
		if _, err := asyncpull.New(critest.NewFakeImageService(), opt); !errors.As(err, &ce) {
			t.Errorf("%s: New = %v, want *ConfigError", name, err)
		}
	}
	s, err := asyncpull.New(critest.NewFakeImageService(), nil, asyncpull.WithMaxParallel(0))
	if err != nil {
		t.Fatalf("a nil Option and MaxParallel 0 (unlimited) must be accepted: %v", err)
	}
	var nilCtx context.Context
	var ae *asyncpull.ArgError
	if _, err := s.Wait(nilCtx, asyncpull.Request{Image: "nginx", PodUID: "p"}); !errors.As(err, &ae) || ae.Arg != "ctx" {
		t.Errorf("Wait(nil ctx) = %v, want *ArgError for ctx", err)
	}
	if _, err := s.Subscribe(""); !errors.As(err, &ae) || ae.Arg != "podUID" {
		t.Errorf("Subscribe(\"\") = %v, want *ArgError for podUID", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if res := s.Ensure(context.Background(), asyncpull.Request{Image: "nginx", PodUID: "p"}); !errors.Is(res.Err, asyncpull.ErrClosed) {
		t.Errorf("Ensure after Close: %+v, want ErrClosed", res)
	}
	if _, err := s.Subscribe("p"); !errors.Is(err, asyncpull.ErrClosed) {
		t.Errorf("Subscribe after Close = %v, want ErrClosed", err)
	}
}

// A zero Scheduler says it was not made by New, and never panics.
func TestZeroScheduler(t *testing.T) {
	var s asyncpull.Scheduler
	var ae *asyncpull.ArgError
	if res := s.Ensure(context.Background(), asyncpull.Request{Image: "nginx", PodUID: "p"}); res.State != asyncpull.StateFailed || res.Reason != "" || !errors.As(res.Err, &ae) || ae.Arg != "Scheduler" {
		t.Errorf("Ensure on a zero Scheduler: %+v, want StateFailed, no reason and an *ArgError for Scheduler", res)
	}
	if _, err := s.Wait(context.Background(), asyncpull.Request{Image: "nginx", PodUID: "p"}); !errors.As(err, &ae) || ae.Method != "Wait" || ae.Arg != "Scheduler" {
		t.Errorf("Wait on a zero Scheduler: %v, want an *ArgError for Scheduler", err)
	}
	if _, err := s.Subscribe("p"); !errors.As(err, &ae) || ae.Method != "Subscribe" {
		t.Errorf("Subscribe on a zero Scheduler: %v, want an *ArgError", err)
	}
	s.Cancel("p")
	if st := s.Stats(); st != (asyncpull.Stats{}) {
		t.Errorf("Stats of a zero Scheduler: %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close of a zero Scheduler: %v", err)
	}
}

// cri-api's FakeImageService used as a zero value has nil maps: its PullImage panics. The pull
// fails with a *PanicError, the process lives on, and the scheduler keeps serving.
func TestPanickingImageServiceFailsThePull(t *testing.T) {
	s := newScheduler(&critest.FakeImageService{}, asyncpull.WithQPS(0, 0))
	defer s.Close()
	res, err := s.Wait(context.Background(), asyncpull.Request{Image: "nginx", PodUID: "p", PullPolicy: asyncpull.PullAlways})
	var pe *asyncpull.PanicError
	if !errors.As(err, &pe) || pe.Method != "PullImage" || res.State == asyncpull.StatePresent {
		t.Fatalf("Wait = %+v, %v; want a failed pull with a *PanicError from PullImage", res, err)
	}
	if st := s.Stats(); st.PullsFailed != 1 {
		t.Fatalf("stats %+v, want one failed pull", st)
	}
}
