package criclient_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/criclient"
)

// FuzzNewGate feeds NewGate and WithAdmission every Limits a caller can
// pass: neither panics, both refuse the same values with a *ConfigError,
// and a Gate NewGate makes admits a first call at once with a background
// ctx and takes its release (twice) back. Dial does not connect
// (WithoutVersionCheck), so an iteration is cheap.
func FuzzNewGate(f *testing.F) {
	f.Add(0.0, 0, 0, 0)
	f.Add(1.0, 1, 1, int(criclient.ClassRead))
	f.Add(-1.0, -1, -1, -1)
	f.Add(math.MaxFloat64, math.MaxInt, math.MaxInt, int(criclient.ClassImagePull))
	f.Add(math.SmallestNonzeroFloat64, 0, 1, 99)
	f.Fuzz(func(t *testing.T, qps float64, burst, maxInFlight, class int) {
		l := criclient.Limits{QPS: qps, Burst: burst, MaxInFlight: maxInFlight}
		clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
		g, gateErr := criclient.NewGate(l, clk)
		if gateErr != nil {
			var ce *criclient.ConfigError
			if g != nil || !errors.As(gateErr, &ce) || ce.Option != "limits" || ce.Reason == "" {
				t.Fatalf("NewGate(%+v) = %v, %T %v; want no Gate and a *ConfigError for limits", l, g, gateErr, gateErr)
			}
		} else {
			ctx := context.Background()
			release, err := g.Acquire(ctx)
			if err != nil {
				t.Fatalf("NewGate(%+v): first Acquire = %v", l, err)
			}
			release()
			release()
		}

		c, dialErr := criclient.Dial(context.Background(), "/nonexistent/crisim.sock",
			criclient.WithoutVersionCheck(), criclient.WithClock(clk),
			criclient.WithAdmission(criclient.Class(class), l))
		if dialErr != nil {
			var ce *criclient.ConfigError
			if c != nil || !errors.As(dialErr, &ce) || ce.Option != "WithAdmission" {
				t.Fatalf("Dial(WithAdmission(%d, %+v)) = %T %v; want a *ConfigError for WithAdmission", class, l, dialErr, dialErr)
			}
		} else if err := c.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
		validClass := class >= int(criclient.ClassRead) && class <= int(criclient.ClassImagePull)
		if validClass && (dialErr == nil) != (gateErr == nil) {
			t.Fatalf("Limits %+v: NewGate error %v, WithAdmission error %v; want both or neither", l, gateErr, dialErr)
		}
		if !validClass && dialErr == nil {
			t.Fatalf("WithAdmission(%d) accepted an unknown class", class)
		}
	})
}
