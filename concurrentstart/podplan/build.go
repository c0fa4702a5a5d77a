package podplan

import (
	"context"
	"fmt"

	"github.com/syncpod/syncpod/concurrentstart"
	corev1 "k8s.io/api/core/v1"
)

// Option configures Build.
type Option func(*options)

type options struct {
	running   []string
	completed []string
}

// WithRunning names containers that are already running. They are not
// started again and edges to them count as met; a running container that
// gates others on its startup check keeps a node that only waits for the
// check (its Start does nothing), and a running init container keeps a node
// that only waits for it to complete.
func WithRunning(names ...string) Option {
	return func(o *options) { o.running = append(o.running, names...) }
}

// WithCompleted names containers that have already exited 0: init
// containers past their turn, or regular containers of a run-to-completion
// pod. They get no node; edges to them count as met. Sidecars cannot be
// completed: one that exited must be started again.
func WithCompleted(names ...string) Option {
	return func(o *options) { o.completed = append(o.completed, names...) }
}

type state uint8

const (
	needsStart state = iota
	running
	completed
)

// Build returns the nodes that start pod's containers in Kubernetes order,
// for concurrentstart.New:
//
//   - init containers (spec.initContainers) strictly in order: each starts
//     after the previous one Completed (regular init container) or Started
//     (sidecar; Ready if it has a startup check);
//   - regular containers (spec.containers) all at once after the last init
//     container's gate, so after every init container completed and every
//     sidecar started (or passed its startup check);
//   - plus the ordering between regular containers given by the
//     AnnotationStartAfter annotation.
//
// Node names are container names. Node functions call funcs with the
// container. WithRunning and WithCompleted leave out what is already done,
// for a partly running pod. The returned nodes are validated; every error
// matches concurrentstart.ErrInvalidPlan and is one of this package's typed
// errors or the executor's:
//   - a nil pod is an *ArgError;
//   - a nil Funcs.Start, or a nil Funcs field the pod needs, is a
//     *MissingFuncError;
//   - a container with an empty name, two containers with one name (a
//     *ConfigError that unwraps to a *concurrentstart.DuplicateNodeError)
//     or a restartPolicy other than Always, OnFailure and Never is a
//     *ConfigError naming the field;
//   - a bad AnnotationStartAfter is an *AnnotationError,
//     *UnknownContainerError or *OrderingError, and an ordering cycle a
//     *concurrentstart.CycleError;
//   - an unknown name in WithRunning or WithCompleted is an
//     *UnknownContainerError, contradictory states a *StateError.
func Build(pod *corev1.Pod, funcs Funcs, opts ...Option) ([]concurrentstart.Node, error) {
	if pod == nil {
		return nil, &ArgError{Method: "Build", Arg: "pod", Reason: "must not be nil"}
	}
	if funcs.Start == nil {
		return nil, &MissingFuncError{Func: "Start"}
	}
	if funcs.HasStartupCheck != nil && funcs.WaitStartup == nil {
		return nil, &MissingFuncError{Func: "WaitStartup"}
	}
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := validateSpec(pod); err != nil {
		return nil, err
	}
	containers := podContainers(pod)
	roles := make(map[string]Role, len(containers))
	for _, c := range containers {
		if _, dup := roles[c.Name]; !dup {
			roles[c.Name] = c.Role
		}
	}
	order, err := parseStartAfter(pod.Annotations[AnnotationStartAfter], roles)
	if err != nil {
		return nil, err
	}
	states, err := containerStates(o, roles)
	if err != nil {
		return nil, err
	}
	b := builder{funcs: &funcs, containers: containers, order: order}
	// The whole pod is validated first, so that a duplicate name or an
	// ordering cycle is reported even when containers involved are running.
	if err := concurrentstart.Validate(b.nodes(nil)); err != nil {
		return nil, fmt.Errorf("podplan: pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	b.err = nil
	nodes := b.nodes(states)
	if err := b.err; err != nil {
		return nil, err
	}
	if err := concurrentstart.Validate(nodes); err != nil { // unreachable: a subset of a valid plan
		return nil, fmt.Errorf("podplan: pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nodes, nil
}

func podContainers(pod *corev1.Pod) []Container {
	var cs []Container
	for i := range pod.Spec.InitContainers {
		spec := pod.Spec.InitContainers[i].DeepCopy()
		role := Init
		if isSidecar(spec) {
			role = Sidecar
		}
		cs = append(cs, Container{Name: spec.Name, Role: role, Index: i, Spec: spec})
	}
	for i := range pod.Spec.Containers {
		spec := pod.Spec.Containers[i].DeepCopy()
		cs = append(cs, Container{Name: spec.Name, Role: Regular, Index: i, Spec: spec})
	}
	return cs
}

func containerStates(o options, roles map[string]Role) (map[string]state, error) {
	states := map[string]state{}
	for _, set := range []struct {
		source string
		names  []string
		st     state
	}{{"WithRunning", o.running, running}, {"WithCompleted", o.completed, completed}} {
		for _, name := range set.names {
			role, ok := roles[name]
			if !ok {
				return nil, &UnknownContainerError{Name: name, Source: set.source}
			}
			if prev, seen := states[name]; seen && prev != set.st {
				return nil, &StateError{Container: name, Reason: "both running and completed"}
			}
			if set.st == completed && role == Sidecar {
				return nil, &StateError{Container: name, Reason: "a sidecar cannot be completed; an exited sidecar must be started again"}
			}
			states[name] = set.st
		}
	}
	return states, nil
}

type builder struct {
	funcs      *Funcs
	containers []Container
	order      map[string][]concurrentstart.Dependency
	err        error
}

// readyTargets returns the regular containers that some ordering edge waits
// on to be ready.
func (b *builder) readyTargets() map[string]bool {
	t := map[string]bool{}
	for _, deps := range b.order {
		for _, d := range deps {
			if d.Condition == concurrentstart.Ready {
				t[d.Node] = true
			}
		}
	}
	return t
}

// nodes builds the plan for the given states (nil: nothing runs yet).
func (b *builder) nodes(states map[string]state) []concurrentstart.Node {
	readyTargets := b.readyTargets()
	// A container gets a node if it must be started, or if it is running but
	// something still has to be waited for: an init container's exit, or a
	// startup check that gates others.
	check := make(map[string]bool, len(b.containers))
	needed := make(map[string]bool, len(b.containers))
	for _, c := range b.containers {
		st := states[c.Name]
		check[c.Name] = b.funcs.hasCheck(c) && (c.Role == Sidecar || readyTargets[c.Name])
		switch c.Role {
		case Init:
			needed[c.Name] = st != completed
			if needed[c.Name] && b.funcs.WaitCompleted == nil && b.err == nil {
				b.err = &MissingFuncError{Func: "WaitCompleted", Container: c.Name}
			}
		default:
			needed[c.Name] = st == needsStart || st == running && check[c.Name]
		}
	}
	var nodes []concurrentstart.Node
	// gate is the edge on the last planned container of the init order;
	// every later container waits on it, and through it on all before it.
	var gate *concurrentstart.Dependency
	for _, c := range b.containers {
		if !needed[c.Name] {
			continue // done: edges to it are met
		}
		n := concurrentstart.Node{Name: c.Name, Start: b.call(c, b.funcs.Start)}
		if states[c.Name] == running {
			n.Start = alreadyRunning
		}
		if check[c.Name] {
			n.Ready = b.call(c, b.funcs.WaitStartup)
		}
		if c.Role == Init {
			n.Complete = b.call(c, b.funcs.WaitCompleted)
		}
		if gate != nil {
			n.DependsOn = append(n.DependsOn, *gate)
		}
		for _, d := range b.order[c.Name] {
			if needed[d.Node] {
				n.DependsOn = append(n.DependsOn, d)
			}
		}
		nodes = append(nodes, n)
		if c.Role != Regular {
			g := concurrentstart.AfterStarted(c.Name)
			switch {
			case c.Role == Init:
				g.Condition = concurrentstart.Completed
			case check[c.Name]:
				g.Condition = concurrentstart.Ready
			}
			gate = &g
		}
	}
	return nodes
}

func (b *builder) call(c Container, fn ContainerFunc) concurrentstart.Func {
	if fn == nil {
		return nil
	}
	return func(ctx context.Context) error { return fn(ctx, c) }
}

func alreadyRunning(context.Context) error { return nil }
