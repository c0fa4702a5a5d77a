package concurrentstart

import (
	"errors"
	"math"

	"k8s.io/utils/clock"
)

// Plan is a validated, immutable dependency graph of nodes, ready to run.
// A Plan may be run any number of times, one after another or concurrently;
// each Run calls the node functions afresh and shares no state with other
// runs. Make one with New; the zero value is a plan of no nodes.
type Plan struct {
	nodes []Node
	index map[string]int
	// unmet[i] is the number of distinct edges node i waits for.
	unmet []int32
	// dependents[i][c-1] lists the nodes with an edge of condition c on node i.
	dependents [][3][]int32
	cfg        config
}

// New validates nodes and returns a Plan that runs them. It returns the same
// errors as Validate, or a *ConfigError for a bad option. nodes is
// copied; changing it afterwards does not change the plan.
func New(nodes []Node, opts ...Option) (*Plan, error) {
	cfg := config{policy: ContinueIndependent, clock: clock.RealClock{}}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	p, err := compile(nodes)
	if err != nil {
		return nil, err
	}
	if cfg.maxParallel == 0 {
		cfg.maxParallel = math.MaxInt
	}
	p.cfg = cfg
	return p, nil
}

// Validate checks nodes without building a plan. It returns nil or an error
// matching ErrInvalidPlan that joins (errors.Join) every *InvalidNodeError,
// *DuplicateNodeError, *UnknownDependencyError and *InvalidDependencyError
// found; only if there are none does it look for a cycle and return a
// *CycleError naming one. Use errors.As to get at a specific kind.
func Validate(nodes []Node) error {
	_, err := compile(nodes)
	return err
}

// Len returns the number of nodes in the plan.
func (p *Plan) Len() int { return len(p.nodes) }

// Names returns the node names in plan order.
func (p *Plan) Names() []string {
	names := make([]string, len(p.nodes))
	for i := range p.nodes {
		names[i] = p.nodes[i].Name
	}
	return names
}

func compile(nodes []Node) (*Plan, error) {
	var errs []error
	p := &Plan{
		nodes:      make([]Node, len(nodes)),
		index:      make(map[string]int, len(nodes)),
		unmet:      make([]int32, len(nodes)),
		dependents: make([][3][]int32, len(nodes)),
	}
	for i, n := range nodes {
		switch {
		case n.Name == "":
			errs = append(errs, &InvalidNodeError{Index: i, Name: n.Name, Reason: "empty name"})
		case n.Start == nil:
			errs = append(errs, &InvalidNodeError{Index: i, Name: n.Name, Reason: "nil Start function"})
		}
		if n.Name == "" {
			continue
		}
		if first, dup := p.index[n.Name]; dup {
			errs = append(errs, &DuplicateNodeError{Name: n.Name, First: first, Second: i})
			continue
		}
		p.index[n.Name] = i
	}
	// deps[i] maps each dependency of node i to its strongest condition, in
	// first-seen order.
	type edge struct {
		to   int
		cond Condition
	}
	deps := make([][]edge, len(nodes))
	for i, n := range nodes {
		p.nodes[i] = n
		p.nodes[i].DependsOn = nil
		seen := map[int]int{}
		for _, d := range n.DependsOn {
			switch {
			case d.Node == "":
				errs = append(errs, &InvalidDependencyError{Node: n.Name, Dependency: d, Reason: "empty node name"})
				continue
			case !d.Condition.valid():
				errs = append(errs, &InvalidDependencyError{Node: n.Name, Dependency: d,
					Reason: "condition must be Started, Ready or Completed"})
				continue
			}
			j, ok := p.index[d.Node]
			if !ok {
				errs = append(errs, &UnknownDependencyError{Node: n.Name, Dependency: d.Node})
				continue
			}
			if k, dup := seen[j]; dup {
				deps[i][k].cond = max(deps[i][k].cond, d.Condition)
				continue
			}
			seen[j] = len(deps[i])
			deps[i] = append(deps[i], edge{to: j, cond: d.Condition})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(append([]error{ErrInvalidPlan}, errs...)...)
	}
	for i := range deps {
		p.nodes[i].DependsOn = make([]Dependency, len(deps[i]))
		for k, e := range deps[i] {
			p.nodes[i].DependsOn[k] = Dependency{Node: nodes[e.to].Name, Condition: e.cond}
			p.dependents[e.to][e.cond-1] = append(p.dependents[e.to][e.cond-1], int32(i))
		}
		p.unmet[i] = int32(len(deps[i]))
	}
	if cycle := p.findCycle(); cycle != nil {
		return nil, cycle
	}
	return p, nil
}

// findCycle runs Kahn's algorithm; if some nodes are left over, every one of
// them waits on another left-over node, so walking dependencies from any of
// them must revisit a node, and the walk between the two visits is a cycle.
func (p *Plan) findCycle() *CycleError {
	n := len(p.nodes)
	unmet := make([]int32, n)
	copy(unmet, p.unmet)
	queue := make([]int32, 0, n)
	for i := range unmet {
		if unmet[i] == 0 {
			queue = append(queue, int32(i))
		}
	}
	for head := 0; head < len(queue); head++ {
		for _, ds := range p.dependents[queue[head]] {
			for _, j := range ds {
				if unmet[j]--; unmet[j] == 0 {
					queue = append(queue, j)
				}
			}
		}
	}
	if len(queue) == n {
		return nil
	}
	start := -1
	for i := range unmet {
		if unmet[i] > 0 {
			start = i
			break
		}
	}
	pos := map[int]int{}
	var path []string
	for cur := start; ; {
		if at, ok := pos[cur]; ok {
			return &CycleError{Path: append(path[at:], p.nodes[cur].Name)}
		}
		pos[cur] = len(path)
		path = append(path, p.nodes[cur].Name)
		next := -1
		for _, d := range p.nodes[cur].DependsOn {
			if j := p.index[d.Node]; unmet[j] > 0 {
				next = j
				break
			}
		}
		if next < 0 { // unreachable: a left-over node always waits on another
			return &CycleError{Path: path}
		}
		cur = next
	}
}
