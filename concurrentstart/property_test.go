package concurrentstart_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"go.uber.org/goleak"
)

// TestPropertyRandomDAGs runs seeded random DAGs (both policies, random
// bounds, injected failures at every phase, cancellation) through
// checkGraph: dependencies are met before every start, the bound holds,
// every node not downstream of a failure completes, results are complete.
func TestPropertyRandomDAGs(t *testing.T) {
	for seed := range uint64(400) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			checkGraph(t, randomDAG(rand.New(rand.NewPCG(seed, 0x5eed))))
		})
	}
	goleak.VerifyNone(t)
}
