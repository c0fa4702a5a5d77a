package concurrentstart_test

import (
	"testing"

	"go.uber.org/goleak"
)

// FuzzRun decodes arbitrary bytes into a graph that may have empty names,
// nil functions, duplicates, unknown or malformed edges and cycles, and
// checks that New returns the right typed error for bad graphs and that a
// run of a good one keeps every invariant, without panics, hangs or leaked
// goroutines.
func FuzzRun(f *testing.F) {
	seeds := [][]byte{
		{},
		{1},
		{3, 0, 0, 1, 0, 3, 0, 0, 0, 0, 3, 1, 0, 3, 1, 1, 2},     // chain
		{3, 0, 0, 1, 0, 3, 0, 1, 2, 1, 0, 1, 0, 3, 1, 1, 2},     // cycle n1 -> n0 -> n1... via edits
		{4, 1, 2, 1, 32, 5, 0, 0, 0, 2, 0, 1, 0, 3, 0, 5, 1, 1}, // fail-fast with failure
		{8, 2, 3, 0, 64 | 1, 5, 2, 0, 2, 3, 1, 1, 0, 1, 0, 3, 2, 3},
		{5, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 5, 1},                // nil start / empty name / dup
		{6, 0, 1, 4, 0, 5, 0, 0, 5, 1, 0, 0, 5, 0, 2, 2, 3, 2, 1}, // cancel after first start
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		before := goleak.IgnoreCurrent()
		checkGraph(t, decodeGraph(data))
		goleak.VerifyNone(t, before)
	})
}
