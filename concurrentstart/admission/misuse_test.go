package admission_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/concurrentstart/admission"
)

func TestMisuse(t *testing.T) {
	var nilAIMD *admission.AIMD
	var nilClock *clock.RealClock
	for name, opt := range map[string]admission.Option{
		"nil limiter":       admission.WithLimiter(nil),
		"typed-nil limiter": admission.WithLimiter(nilAIMD),
		"nil clock":         admission.WithClock(nil),
		"typed-nil clock":   admission.WithClock(nilClock),
		"negative aging":    admission.WithAging(-time.Second),
	} {
		if _, err := admission.New(opt); !errors.As(err, new(*admission.ConfigError)) {
			t.Errorf("%s: New: %v, want *ConfigError", name, err)
		}
	}
	for name, cfg := range map[string]admission.AIMDConfig{
		"negative":       {Initial: -1},
		"backoff 1":      {Backoff: 1},
		"tolerance 1":    {Tolerance: 1},
		"min above max":  {Min: 5, Max: 2},
		"initial above":  {Initial: 9, Max: 8},
		"initial below":  {Initial: 1, Min: 2},
		"backoff over 1": {Backoff: 1.5},
		"saturated < 0":  {SaturatedAt: -0.5},
		"saturated > 1":  {SaturatedAt: 1.5},
	} {
		if _, err := admission.NewAIMD(cfg); !errors.As(err, new(*admission.ConfigError)) {
			t.Errorf("%s: NewAIMD: %v, want *ConfigError", name, err)
		}
	}
	if _, err := admission.New(nil); err != nil {
		t.Errorf("a nil Option must be ignored: %v", err)
	}

	c := newController(t)
	var nilCtx context.Context
	if _, err := c.Acquire(nilCtx, admission.Request{Pod: "p"}); !isArgError(err, "ctx") {
		t.Errorf("nil ctx: %v, want *ArgError for ctx", err)
	}
	if _, err := c.Acquire(context.Background(), admission.Request{}); !isArgError(err, "r.Pod") {
		t.Errorf("empty pod: %v, want *ArgError for pod", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Acquire(cctx, admission.Request{Pod: "p"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}

	var zero admission.Controller
	if _, err := zero.Acquire(context.Background(), admission.Request{Pod: "p"}); !isArgError(err, "Controller") {
		t.Errorf("zero Controller: %v, want *ArgError saying use New", err)
	}
	zero.Forget("p")
	if err := zero.Close(); err != nil {
		t.Errorf("zero Close: %v", err)
	}
	if s := zero.Stats(); s != (admission.Stats{}) {
		t.Errorf("zero Stats: %+v", s)
	}

	g, err := c.Acquire(context.Background(), admission.Request{Pod: "p"})
	if err != nil {
		t.Fatal(err)
	}
	g.Release(nil)
	g.Release(nil) // twice: nothing
	if s := c.Stats(); s.Held != 0 {
		t.Errorf("held after double Release: %d", s.Held)
	}
	var nilGrant *admission.Grant
	nilGrant.Release(nil)
}

func isArgError(err error, arg string) bool {
	var ae *admission.ArgError
	return errors.As(err, &ae) && ae.Arg == arg
}
