package podworkers_test

import (
	"errors"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/internal/typednil"
	"github.com/syncpod/syncpod/podworkers"
)

// Bad input gets a clear typed error and no process death.
func TestMisuse(t *testing.T) {
	var typedNil *fakeSyncer
	if !typednil.Is(podworkers.Syncer(typedNil)) {
		t.Fatal("typednil.Is disagrees with the test")
	}
	var ce *podworkers.ConfigError
	for name, s := range map[string]podworkers.Syncer{"nil": nil, "typed nil": typedNil} {
		if w, err := podworkers.New(s); w != nil || !errors.As(err, &ce) || ce.Option != "syncer" {
			t.Errorf("New(%s syncer) = %v, %v; want a *ConfigError for syncer", name, w, err)
		}
	}
	var nilClock *testclock.FakeClock
	for name, opt := range map[string]podworkers.Option{
		"negative MaxParallel":    podworkers.WithMaxParallel(-1),
		"negative resync":         podworkers.WithResyncInterval(-time.Second),
		"zero back-off":           podworkers.WithBackOff(0, time.Second),
		"negative back-off":       podworkers.WithBackOff(-time.Second, time.Second),
		"back-off max below init": podworkers.WithBackOff(time.Minute, time.Second),
		"nil clock":               podworkers.WithClock(nil),
		"typed-nil clock":         podworkers.WithClock(nilClock),
	} {
		if w, err := podworkers.New(newFake(), opt); w != nil || !errors.As(err, &ce) || ce.Reason == "" {
			t.Errorf("%s: New = %v, %v; want a *ConfigError", name, w, err)
		}
	}
	w, err := podworkers.New(newFake(), nil, podworkers.WithMaxParallel(0), podworkers.WithResyncInterval(0))
	if err != nil {
		t.Fatalf("a nil Option, MaxParallel 0 and resync 0 must be accepted: %v", err)
	}
	neg := -time.Second
	var ae *podworkers.ArgError
	for name, c := range map[string]struct {
		u   podworkers.PodUpdate
		arg string
	}{
		"nil pod":               {podworkers.PodUpdate{Type: podworkers.UpdateCreate}, "Pod"},
		"kill with nothing":     {podworkers.PodUpdate{Type: podworkers.UpdateKill}, "Pod"},
		"zero type":             {podworkers.PodUpdate{Pod: pod("a")}, "Type"},
		"unknown type":          {podworkers.PodUpdate{Type: 99, Pod: pod("a")}, "Type"},
		"empty UID":             {podworkers.PodUpdate{Type: podworkers.UpdateCreate, Pod: pod("")}, "UID"},
		"orphan with empty UID": {podworkers.PodUpdate{Type: podworkers.UpdateKill, RuntimePod: &podworkers.RuntimePod{}}, "UID"},
		"runtime pod on sync":   {podworkers.PodUpdate{Type: podworkers.UpdateSync, Pod: pod("a"), RuntimePod: &podworkers.RuntimePod{UID: "a"}}, "RuntimePod"},
		"pod and runtime pod":   {podworkers.PodUpdate{Type: podworkers.UpdateKill, Pod: pod("a"), RuntimePod: &podworkers.RuntimePod{UID: "a"}}, "RuntimePod"},
		"grace on update":       {podworkers.PodUpdate{Type: podworkers.UpdateUpdate, Pod: pod("a"), GracePeriod: &neg}, "GracePeriod"},
		"negative grace":        {podworkers.PodUpdate{Type: podworkers.UpdateKill, Pod: pod("a"), GracePeriod: &neg}, "GracePeriod"},
	} {
		if err := w.Update(c.u); !errors.As(err, &ae) || ae.Method != "Update" || ae.Arg != c.arg {
			t.Errorf("%s: Update = %v, want an *ArgError for %s", name, err, c.arg)
		}
	}
	if w.Stats().Pods != 0 {
		t.Fatalf("a refused update left a record: %+v", w.Stats())
	}
	create(t, w, pod("a"))
	if err := w.Forget("a"); !errors.Is(err, podworkers.ErrNotFinished) {
		t.Errorf("Forget of a live pod = %v, want ErrNotFinished", err)
	}
	if err := w.Forget("unknown"); err != nil {
		t.Errorf("Forget of an unknown UID = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if err := w.Update(podworkers.PodUpdate{Type: podworkers.UpdateCreate, Pod: pod("b")}); !errors.Is(err, podworkers.ErrClosed) {
		t.Errorf("Update after Close = %v, want ErrClosed", err)
	}
	if err := w.Forget("a"); !errors.Is(err, podworkers.ErrClosed) {
		t.Errorf("Forget after Close = %v, want ErrClosed", err)
	}
	if w.Wake("a") {
		t.Error("Wake after Close scheduled a call")
	}
}

// A zero Workers says it was not made by New, and never panics.
func TestZeroWorkers(t *testing.T) {
	var w podworkers.Workers
	var ae *podworkers.ArgError
	if err := w.Update(podworkers.PodUpdate{Type: podworkers.UpdateCreate, Pod: pod("a")}); !errors.As(err, &ae) || ae.Method != "Update" || ae.Arg != "Workers" {
		t.Errorf("Update on a zero Workers = %v, want an *ArgError for Workers", err)
	}
	if err := w.Forget("a"); !errors.As(err, &ae) || ae.Method != "Forget" {
		t.Errorf("Forget on a zero Workers = %v", err)
	}
	if w.Wake("a") || w.Phase("a") != podworkers.PhaseUnknown || w.Stats() != (podworkers.Stats{}) {
		t.Error("a zero Workers reports state")
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close of a zero Workers = %v", err)
	}
}
