package concurrentstart_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	cs "github.com/syncpod/syncpod/concurrentstart"
)

const benchNodes = 1000

// starter is how a set of no-op starts gets run: a plain loop (the
// kubelet's way, and the floor for any executor) or a concurrentstart plan.
type starter interface {
	run(ctx context.Context) error
}

type loopStarter struct{ nodes []cs.Node }

// run calls the starts in plan order, which the shapes make topological.
func (l loopStarter) run(ctx context.Context) error {
	for i := range l.nodes {
		if err := l.nodes[i].Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

type planStarter struct{ plan *cs.Plan }

func (p planStarter) run(ctx context.Context) error {
	_, err := p.plan.Run(ctx)
	return err
}

var (
	_ starter = loopStarter{}
	_ starter = planStarter{}
)

// shapes of a 1,000-node DAG; dependencies always point to earlier nodes.
func benchShapes() map[string][]cs.Node {
	noopStart := func(context.Context) error { return nil }
	mk := func(deps func(i int) []cs.Dependency) []cs.Node {
		nodes := make([]cs.Node, benchNodes)
		for i := range nodes {
			nodes[i] = cs.Node{Name: fmt.Sprintf("n%04d", i), Start: noopStart, DependsOn: deps(i)}
		}
		return nodes
	}
	rng := rand.New(rand.NewPCG(1, 2))
	return map[string][]cs.Node{
		"independent": mk(func(int) []cs.Dependency { return nil }),
		"chain": mk(func(i int) []cs.Dependency {
			if i == 0 {
				return nil
			}
			return []cs.Dependency{cs.AfterStarted(fmt.Sprintf("n%04d", i-1))}
		}),
		// 10 layers of 100; each node waits for 3 random nodes of the layer
		// before, with a random condition.
		"layered": mk(func(i int) []cs.Dependency {
			if i < 100 {
				return nil
			}
			var d []cs.Dependency
			for range 3 {
				j := (i/100-1)*100 + rng.IntN(100)
				d = append(d, cs.Dependency{Node: fmt.Sprintf("n%04d", j), Condition: cs.Condition(1 + rng.IntN(3))})
			}
			return d
		}),
	}
}

// BenchmarkRunOverhead measures what the executor costs per node for a
// 1,000-node DAG of no-op starts, against a plain loop over the same
// starts; ns/node is the figure to compare.
func BenchmarkRunOverhead(b *testing.B) {
	shapes := benchShapes()
	for _, shape := range []string{"independent", "chain", "layered"} {
		nodes := shapes[shape]
		variants := []struct {
			name string
			s    starter
		}{{"plain-loop", loopStarter{nodes}}}
		for _, bound := range []int{0, 8, 1} {
			var opts []cs.Option
			name := "concurrentstart-unbounded"
			if bound > 0 {
				opts = append(opts, cs.WithMaxParallel(bound))
				name = fmt.Sprintf("concurrentstart-max%d", bound)
			}
			p, err := cs.New(nodes, opts...)
			if err != nil {
				b.Fatal(err)
			}
			variants = append(variants, struct {
				name string
				s    starter
			}{name, planStarter{p}})
		}
		for _, v := range variants {
			b.Run("shape="+shape+"/impl="+v.name, func(b *testing.B) {
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if err := v.s.run(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchNodes), "ns/node")
			})
		}
	}
}

// BenchmarkNew measures validation and compilation of a 1,000-node DAG.
func BenchmarkNew(b *testing.B) {
	nodes := benchShapes()["layered"]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cs.New(nodes); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchNodes), "ns/node")
}
