package concurrentstart_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/syncpod/syncpod/concurrentstart"
)

func start(context.Context) error { return nil }

// A pod-like plan: an init step that must complete, a proxy that must be
// ready, then two apps at once.
func Example() {
	plan, err := concurrentstart.New([]concurrentstart.Node{
		{Name: "init", Start: start, Complete: func(context.Context) error { return nil /* exited 0 */ }},
		{Name: "proxy", Start: start, Ready: func(context.Context) error { return nil /* probe passed */ },
			DependsOn: []concurrentstart.Dependency{concurrentstart.AfterCompleted("init")}},
		{Name: "app", Start: start, DependsOn: []concurrentstart.Dependency{concurrentstart.AfterReady("proxy")}},
		{Name: "worker", Start: start, DependsOn: []concurrentstart.Dependency{concurrentstart.AfterReady("proxy")}},
	}, concurrentstart.WithMaxParallel(8))
	if err != nil {
		fmt.Println(err)
		return
	}
	report, err := plan.Run(context.Background())
	fmt.Println("error:", err)
	for _, r := range report.Results { // in plan order
		fmt.Println(r.Name, r.Outcome, r.Reached)
	}
	// Output:
	// error: <nil>
	// init Succeeded completed
	// proxy Succeeded completed
	// app Succeeded completed
	// worker Succeeded completed
}

// Under ContinueIndependent a failure skips only what waits on it.
func Example_continueIndependent() {
	plan, _ := concurrentstart.New([]concurrentstart.Node{
		{Name: "db", Start: func(context.Context) error { return errors.New("image not found") }},
		{Name: "api", Start: start, DependsOn: []concurrentstart.Dependency{concurrentstart.AfterStarted("db")}},
		{Name: "ui", Start: start, DependsOn: []concurrentstart.Dependency{concurrentstart.AfterStarted("api")}},
		{Name: "metrics", Start: start},
	})
	report, err := plan.Run(context.Background())
	for _, r := range report.Results {
		fmt.Println(strings.TrimSpace(r.Name + ": " + r.Outcome.String() + " " + r.Reason))
	}
	var re *concurrentstart.RunError
	if errors.As(err, &re) {
		fmt.Println("failed:", re.Failed, "skipped:", re.Skipped)
	}
	// Output:
	// db: Failed
	// api: Skipped dependency "db" failed
	// ui: Skipped dependency "api" was skipped because "db" failed
	// metrics: Succeeded
	// failed: [db] skipped: [api ui]
}

// Validate names the cycle.
func ExampleValidate() {
	err := concurrentstart.Validate([]concurrentstart.Node{
		{Name: "a", Start: start, DependsOn: []concurrentstart.Dependency{concurrentstart.AfterStarted("b")}},
		{Name: "b", Start: start, DependsOn: []concurrentstart.Dependency{concurrentstart.AfterReady("c")}},
		{Name: "c", Start: start, DependsOn: []concurrentstart.Dependency{concurrentstart.AfterCompleted("a")}},
	})
	var cycle *concurrentstart.CycleError
	fmt.Println(errors.As(err, &cycle), cycle.Path)
	fmt.Println(err)
	// Output:
	// true [a b c a]
	// concurrentstart: dependency cycle: "a" -> "b" -> "c" -> "a"
}
