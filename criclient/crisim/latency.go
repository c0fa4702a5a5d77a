package crisim

import (
	"math"
	"math/rand/v2"
	"time"
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

// Fixed is a constant latency.
func Fixed(d time.Duration) Latency {
	return LatencyFunc(func(*rand.Rand) time.Duration { return d })
}

// Uniform is a latency drawn uniformly from [min, max]. Arguments in the
// wrong order are swapped.
func Uniform(min, max time.Duration) Latency {
	if max < min {
		min, max = max, min
	}
	span := int64(max - min)
	return LatencyFunc(func(rng *rand.Rand) time.Duration {
		if span <= 0 {
			return min
		}
		return min + time.Duration(rng.Int64N(span+1))
	})
}

// z99 is the standard normal quantile of 0.99.
const z99 = 2.3263478740408408

// LogNormal is a heavy-tailed latency with the given median and 99th
// percentile, the usual shape of RPC latencies. A p99 at or below the median
// gives a Fixed(median) latency.
func LogNormal(median, p99 time.Duration) Latency {
	if median <= 0 {
		return Fixed(0)
	}
	if p99 <= median {
		return Fixed(median)
	}
	mu := math.Log(float64(median))
	sigma := math.Log(float64(p99)/float64(median)) / z99
	return LatencyFunc(func(rng *rand.Rand) time.Duration {
		return time.Duration(math.Exp(mu + sigma*rng.NormFloat64()))
	})
}
