package crisim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/syncpod/syncpod/internal/typednil"
)

// Latency is a distribution of call latencies. Sample is called with the
// runtime's seeded random source, one call at a time.
type Latency interface {
	// Sample draws one latency from rng. It must use rng, not a global
	// source, so that a runtime with a fixed seed is reproducible; a
	// negative result is treated as no delay.
	Sample(rng *rand.Rand) time.Duration
}

// LatencyFunc adapts a function to Latency.
type LatencyFunc func(rng *rand.Rand) time.Duration

// Sample calls f.
func (f LatencyFunc) Sample(rng *rand.Rand) time.Duration { return f(rng) }

// latency is what Fixed, Uniform and LogNormal return: a distribution and,
// for arguments WithLatency cannot use, what is wrong with them.
type latency struct {
	sample  func(rng *rand.Rand) time.Duration
	problem string
}

// Sample draws from the distribution.
func (l latency) Sample(rng *rand.Rand) time.Duration { return l.sample(rng) }

// invalid is a latency WithLatency refuses, saying why; sampled anyway (by
// a caller of Sample), it is no delay.
func invalid(format string, args ...any) Latency {
	return latency{sample: func(*rand.Rand) time.Duration { return 0 }, problem: fmt.Sprintf(format, args...)}
}

// latencyProblem says what is wrong with l, or "" if WithLatency can use it.
func latencyProblem(l Latency) string {
	if typednil.Is(l) {
		return "must not be a typed nil"
	}
	if v, ok := l.(latency); ok {
		return v.problem
	}
	return ""
}

// Fixed is a constant latency. A negative d is refused by WithLatency.
func Fixed(d time.Duration) Latency {
	if d < 0 {
		return invalid("Fixed(%v): negative duration", d)
	}
	return latency{sample: func(*rand.Rand) time.Duration { return d }}
}

// Uniform is a latency drawn uniformly from [min, max]. Arguments in the
// wrong order are swapped; a negative one is refused by WithLatency.
func Uniform(min, max time.Duration) Latency {
	if min < 0 || max < 0 {
		return invalid("Uniform(%v, %v): negative duration", min, max)
	}
	if max < min {
		min, max = max, min
	}
	span := uint64(max - min) // at most MaxInt64: both are non-negative
	return latency{sample: func(rng *rand.Rand) time.Duration {
		if span == 0 {
			return min
		}
		return min + time.Duration(rng.Uint64N(span+1))
	}}
}

// z99 is the standard normal quantile of 0.99.
const z99 = 2.3263478740408408

// LogNormal is a heavy-tailed latency with the given median and 99th
// percentile, the usual shape of RPC latencies. A zero median gives a
// Fixed(0) latency, a p99 at or below the median a Fixed(median) one; a
// negative median or p99 is refused by WithLatency. Samples beyond the
// largest time.Duration are that duration.
func LogNormal(median, p99 time.Duration) Latency {
	if median < 0 || p99 < 0 {
		return invalid("LogNormal(%v, %v): negative duration", median, p99)
	}
	if median == 0 {
		return Fixed(0)
	}
	if p99 <= median {
		return Fixed(median)
	}
	mu := math.Log(float64(median))
	sigma := math.Log(float64(p99)/float64(median)) / z99
	return latency{sample: func(rng *rand.Rand) time.Duration {
		v := math.Exp(mu + sigma*rng.NormFloat64())
		if v >= math.MaxInt64 {
			return math.MaxInt64
		}
		return time.Duration(v)
	}}
}
