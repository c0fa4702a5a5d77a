package main

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/syncpod/syncpod/examples/syncpod/scenario"
)

// Scenario is one named workload: the pods, the simulated node and, for
// some, an action during the run.
type Scenario struct {
	Name    string
	About   string
	Runtime scenario.Runtime
	Pods    []*corev1.Pod
	// Measured names the pods whose startup latencies are reported (all
	// when nil).
	Measured map[string]bool
	// Stall, if set, stalls every runtime call for Stall.For, Stall.After
	// the pods were applied.
	Stall *StallSpec
	// Churn, if set, replaces "apply all pods at once".
	Churn *ChurnSpec
	// HealthThreshold overrides the PLEG health threshold (0: scaled kubelet default).
	HealthThreshold time.Duration
}

// measures reports whether the pod namespace/name key is one whose startup
// sc reports.
func (sc Scenario) measures(key string) bool { return sc.Measured == nil || sc.Measured[key] }

// StallSpec is a runtime stall window.
type StallSpec struct{ After, For time.Duration }

// ChurnSpec creates a pod every Every and deletes each one Life after it
// was created, Total pods in all.
type ChurnSpec struct {
	Every, Life time.Duration
	Total       int
}

func scaleDur(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

// burst: 50 pods, each one init container and three containers, over ten
// images (one init image, nine app images), arriving together.
func burst(scale float64, pods int) Scenario {
	rt := scenario.DefaultRuntime(scale)
	initImg := scenario.Image{Ref: "registry.sim/init:1", Size: 5e6}
	apps := scenario.Images("app", 9, 40e6)
	rt.Images = append([]scenario.Image{initImg}, apps...)
	s := Scenario{Name: "burst", Runtime: rt,
		About: fmt.Sprintf("%d pods x (1 init + 3 containers), 10 images, all at once", pods)}
	for i := 0; i < pods; i++ {
		s.Pods = append(s.Pods, scenario.Pod(scenario.PodOptions{
			Name: fmt.Sprintf("burst-%02d", i), Init: []string{initImg.Ref}, InitRun: scaleDur(200*time.Millisecond, scale),
			Containers: []string{apps[i%9].Ref, apps[(i+3)%9].Ref, apps[(i+6)%9].Ref},
		}))
	}
	return s
}

// bigImage: 20 small pods plus (when withBig) one pod on a 3 GB image.
// Only the small pods are measured.
func bigImage(scale float64, withBig bool) Scenario {
	rt := scenario.DefaultRuntime(scale)
	small := scenario.Images("small", 5, 10e6)
	rt.Images = small
	name := "big-image"
	about := "20 small pods + 1 pod on a 3 GB image; small pods measured"
	if !withBig {
		name = "no-big-image"
		about = "the same 20 small pods alone, for the ratio"
	}
	s := Scenario{Name: name, About: about, Runtime: rt, Measured: map[string]bool{}}
	if withBig {
		big := scenario.Image{Ref: "registry.sim/big-model:1", Size: 3e9}
		s.Runtime.Images = append(s.Runtime.Images, big)
		s.Pods = append(s.Pods, scenario.Pod(scenario.PodOptions{Name: "big", Containers: []string{big.Ref}}))
	}
	for i := 0; i < 20; i++ {
		p := scenario.Pod(scenario.PodOptions{Name: fmt.Sprintf("small-%02d", i), Containers: []string{small[i%5].Ref}})
		s.Pods = append(s.Pods, p)
		s.Measured["default/"+p.Name] = true
	}
	return s
}

// stall: a 30-pod burst during which every runtime call blocks for 3 s
// (scaled); the PLEG health threshold is 1.5 s (scaled) so the report shows.
func stall(scale float64) Scenario {
	s := burst(scale, 30)
	s.Name = "stall"
	s.About = "30-pod burst; every runtime call stalls for 3 s after 0.5 s"
	s.Stall = &StallSpec{After: scaleDur(500*time.Millisecond, scale), For: scaleDur(3*time.Second, scale)}
	s.HealthThreshold = scaleDur(1500*time.Millisecond, scale)
	return s
}

// churn: a pod created every 100 ms, each deleted 8 s after creation, 60
// in all; goroutines and per-pod entries must return to where they were.
func churn(scale float64) Scenario {
	rt := scenario.DefaultRuntime(scale)
	imgs := scenario.Images("churn", 3, 10e6)
	rt.Images = imgs
	s := Scenario{Name: "churn", Runtime: rt, About: "a pod every 100 ms, each deleted 8 s after creation, 60 pods",
		Churn: &ChurnSpec{Every: scaleDur(100*time.Millisecond, scale), Life: scaleDur(8*time.Second, scale), Total: 60}}
	for i := 0; i < 60; i++ {
		s.Pods = append(s.Pods, scenario.Pod(scenario.PodOptions{
			Name: fmt.Sprintf("churn-%02d", i), Sidecars: []string{imgs[i%3].Ref}, Containers: []string{imgs[(i+1)%3].Ref},
		}))
	}
	return s
}

func scenarios(scale float64) map[string][]Scenario {
	return map[string][]Scenario{
		"burst":     {burst(scale, 50)},
		"big-image": {bigImage(scale, true), bigImage(scale, false)},
		"stall":     {stall(scale)},
		"churn":     {churn(scale)},
	}
}
