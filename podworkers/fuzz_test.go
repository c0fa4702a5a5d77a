package podworkers_test

import (
	"errors"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/podworkers"
)

// FuzzNew feeds New every option value a caller can pass: it never panics,
// refuses a bad value with a *ConfigError naming an option, and Workers it
// makes sync a pod, kill it and close.
func FuzzNew(f *testing.F) {
	f.Add(0, int64(0), int64(0), int64(0), false, false)
	f.Add(3, int64(time.Second), int64(10*time.Second), int64(time.Minute), true, true)
	f.Add(-1, int64(-1), int64(-1), int64(-1), true, false)
	f.Fuzz(func(t *testing.T, maxParallel int, boInitial, boMax, resync int64, setBackOff, kill bool) {
		opts := []podworkers.Option{
			podworkers.WithClock(testclock.NewFakeClock(t0)),
			podworkers.WithMaxParallel(maxParallel),
			podworkers.WithResyncInterval(time.Duration(resync)),
		}
		if setBackOff {
			opts = append(opts, podworkers.WithBackOff(time.Duration(boInitial), time.Duration(boMax)))
		}
		fake := newFake()
		w, err := podworkers.New(fake, opts...)
		if err != nil {
			var ce *podworkers.ConfigError
			if w != nil || !errors.As(err, &ce) || ce.Option == "" || ce.Reason == "" {
				t.Fatalf("New refused with %T %v (Workers %v); want a *ConfigError and no Workers", err, err, w)
			}
			return
		}
		if maxParallel < 0 || resync < 0 || (setBackOff && (boInitial <= 0 || boMax < boInitial)) {
			t.Fatalf("New accepted maxParallel %d, resync %d, back-off %d..%d", maxParallel, resync, boInitial, boMax)
		}
		create(t, w, pod("a"))
		if kill {
			update(t, w, podworkers.PodUpdate{Type: podworkers.UpdateKill, Pod: pod("a")})
		}
		settle(t, w)
		want := podworkers.PhaseSyncing
		if kill {
			want = podworkers.PhaseFinished
		}
		if ph := w.Phase("a"); ph != want {
			t.Fatalf("phase %v, want %v", ph, want)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := w.Update(podworkers.PodUpdate{Type: podworkers.UpdateSync, Pod: pod("a")}); !errors.Is(err, podworkers.ErrClosed) {
			t.Fatalf("Update after Close: %v", err)
		}
	})
}
