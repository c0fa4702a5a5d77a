package pleg

import (
	"context"
	"errors"
	"testing"
	"time"

	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"
)

// FuzzNew feeds New every option value a caller can pass: it never panics,
// refuses a bad value with a *ConfigError naming an option, and a PLEG it
// makes starts, subscribes (a bad buffer is an *ArgError) and closes. Each
// iteration is cheap: a fake runtime, a fake clock that never moves, one
// relist.
func FuzzNew(f *testing.F) {
	ms := int64(time.Millisecond)
	f.Add(int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), 0, 0, 0, false, false, false)
	f.Add(int64(time.Second), int64(3*time.Minute), int64(300*time.Second), int64(time.Minute), int64(2*time.Minute), 200*ms, 30000*ms, DefaultChannelCapacity, DefaultInspectParallelism, 0, true, false, true)
	f.Add(int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), -1, -1, -1, true, true, true)
	f.Add(int64(time.Minute), int64(time.Minute), int64(1), int64(1), int64(1), int64(1), int64(1), MaxChannelCapacity+1, 0, MaxChannelCapacity+1, true, true, true)
	f.Add(int64(1<<62), int64(1<<63-1), int64(1<<63-1), int64(1<<62), int64(1<<63-1), int64(1<<63-1), int64(1<<63-1), 1<<62, 1<<62, 1<<62, true, false, true)
	f.Fuzz(func(t *testing.T, period, threshold, safetyNet, probe, timeout, boInitial, boMax int64, capacity, parallelism, buffer int, events, changed, start bool) {
		opts := []Option{
			WithClock(testclock.NewFakeClock(t0)),
			WithEventStream(events),
			WithChangedEvents(changed),
			WithChannelCapacity(capacity),
			WithInspectParallelism(parallelism),
		}
		// Zero durations are the caller leaving the default (zero is
		// refused by every duration option but WithProbePeriod's).
		for _, o := range []struct {
			d   int64
			opt func(time.Duration) Option
		}{{period, WithRelistPeriod}, {threshold, WithThreshold}, {safetyNet, WithSafetyNetPeriod}, {probe, WithProbePeriod}, {timeout, WithRelistTimeout}} {
			if o.d != 0 {
				opts = append(opts, o.opt(time.Duration(o.d)))
			}
		}
		if boInitial != 0 || boMax != 0 {
			opts = append(opts, WithBackOff(time.Duration(boInitial), time.Duration(boMax)))
		}
		p, err := New(critest.NewFakeRuntimeService(), newFakeCache(), opts...)
		if err != nil {
			var ce *ConfigError
			if p != nil || !errors.As(err, &ce) || ce.Option == "" || ce.Reason == "" {
				t.Fatalf("New refused with %T %v (PLEG %v); want a *ConfigError and no PLEG", err, err, p)
			}
			return
		}
		if capacity < 0 || capacity > MaxChannelCapacity || parallelism < 0 {
			t.Fatalf("New accepted capacity %d, parallelism %d", capacity, parallelism)
		}
		if start {
			if err := p.Start(context.Background()); err != nil {
				t.Fatalf("Start: %v", err)
			}
		}
		s, err := p.Subscribe(buffer)
		var ae *ArgError
		switch {
		case buffer < 0 || buffer > MaxChannelCapacity:
			if s != nil || !errors.As(err, &ae) || ae.Arg != "buffer" {
				t.Fatalf("Subscribe(%d) = %v, %v; want an *ArgError", buffer, s, err)
			}
		case err != nil:
			t.Fatalf("Subscribe(%d): %v", buffer, err)
		}
		if err := p.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if s != nil && !errors.Is(s.Err(), ErrClosed) {
			t.Fatalf("subscription after Close: %v", s.Err())
		}
		if _, err := p.Healthy(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Healthy after Close: %v", err)
		}
	})
}
