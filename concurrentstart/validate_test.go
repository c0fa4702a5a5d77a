package concurrentstart_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	cs "github.com/syncpod/syncpod/concurrentstart"
)

func noop(context.Context) error { return nil }

func node(name string, deps ...cs.Dependency) cs.Node {
	return cs.Node{Name: name, DependsOn: deps, Start: noop}
}

func TestValidateTypedErrors(t *testing.T) {
	tests := []struct {
		name  string
		nodes []cs.Node
		check func(t *testing.T, err error)
	}{
		{"duplicate", []cs.Node{node("a"), node("b"), node("a")}, func(t *testing.T, err error) {
			var e *cs.DuplicateNodeError
			if !errors.As(err, &e) || e.Name != "a" || e.First != 0 || e.Second != 2 {
				t.Fatalf("got %v", err)
			}
		}},
		{"unknown dependency", []cs.Node{node("a", cs.AfterStarted("ghost"))}, func(t *testing.T, err error) {
			var e *cs.UnknownDependencyError
			if !errors.As(err, &e) || e.Node != "a" || e.Dependency != "ghost" {
				t.Fatalf("got %v", err)
			}
		}},
		{"empty name", []cs.Node{node("a"), node("")}, func(t *testing.T, err error) {
			var e *cs.InvalidNodeError
			if !errors.As(err, &e) || e.Index != 1 {
				t.Fatalf("got %v", err)
			}
		}},
		{"nil start", []cs.Node{{Name: "a"}}, func(t *testing.T, err error) {
			var e *cs.InvalidNodeError
			if !errors.As(err, &e) || e.Name != "a" || e.Reason != "nil Start function" {
				t.Fatalf("got %v", err)
			}
		}},
		{"unset condition", []cs.Node{node("a"), node("b", cs.Dependency{Node: "a"})}, func(t *testing.T, err error) {
			var e *cs.InvalidDependencyError
			if !errors.As(err, &e) || e.Node != "b" || e.Dependency.Node != "a" {
				t.Fatalf("got %v", err)
			}
		}},
		{"empty dependency name", []cs.Node{node("a", cs.AfterReady(""))}, func(t *testing.T, err error) {
			var e *cs.InvalidDependencyError
			if !errors.As(err, &e) || e.Node != "a" {
				t.Fatalf("got %v", err)
			}
		}},
		{"cycle", []cs.Node{
			node("x"),
			node("a", cs.AfterStarted("b"), cs.AfterStarted("x")),
			node("b", cs.AfterCompleted("c")),
			node("c", cs.AfterReady("a")),
		}, func(t *testing.T, err error) {
			var e *cs.CycleError
			if !errors.As(err, &e) || !slices.Equal(e.Path, []string{"a", "b", "c", "a"}) {
				t.Fatalf("got %v", err)
			}
			if want := `concurrentstart: dependency cycle: "a" -> "b" -> "c" -> "a"`; err.Error() != want {
				t.Fatalf("message %q, want %q", err.Error(), want)
			}
		}},
		{"self cycle", []cs.Node{node("a", cs.AfterStarted("a"))}, func(t *testing.T, err error) {
			var e *cs.CycleError
			if !errors.As(err, &e) || !slices.Equal(e.Path, []string{"a", "a"}) {
				t.Fatalf("got %v", err)
			}
		}},
		{"all structural errors joined", []cs.Node{node(""), node("a", cs.AfterStarted("ghost")), node("a")}, func(t *testing.T, err error) {
			var inv *cs.InvalidNodeError
			var unk *cs.UnknownDependencyError
			var dup *cs.DuplicateNodeError
			if !errors.As(err, &inv) || !errors.As(err, &unk) || !errors.As(err, &dup) {
				t.Fatalf("got %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cs.Validate(tt.nodes)
			if !errors.Is(err, cs.ErrInvalidPlan) {
				t.Fatalf("Validate = %v, want ErrInvalidPlan", err)
			}
			tt.check(t, err)
			if _, err := cs.New(tt.nodes); !errors.Is(err, cs.ErrInvalidPlan) {
				t.Fatalf("New = %v, want ErrInvalidPlan", err)
			}
		})
	}
}

func TestValidateAcceptsDAG(t *testing.T) {
	nodes := []cs.Node{
		node("d", cs.AfterStarted("b"), cs.AfterStarted("c")),
		node("b", cs.AfterCompleted("a"), cs.AfterStarted("a")), // repeated edge: strongest wins
		node("c", cs.AfterReady("a")),
		node("a"),
	}
	if err := cs.Validate(nodes); err != nil {
		t.Fatal(err)
	}
	p, err := cs.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Names(); !slices.Equal(got, []string{"d", "b", "c", "a"}) || p.Len() != 4 {
		t.Fatalf("Names = %v", got)
	}
}

func TestNewInvalidOptions(t *testing.T) {
	for name, opt := range map[string]cs.Option{
		"WithMaxParallel":   cs.WithMaxParallel(-1),
		"WithFailurePolicy": cs.WithFailurePolicy(cs.FailurePolicy(9)),
		"WithClock":         cs.WithClock(nil),
	} {
		_, err := cs.New([]cs.Node{node("a")}, opt)
		var e *cs.ConfigError
		if !errors.As(err, &e) || e.Option != name || errors.Is(err, cs.ErrInvalidPlan) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}
