package agent

// sandboxCandidate is one of a pod's sandboxes as the runtime lists it,
// with the running containers attributed to it.
type sandboxCandidate struct {
	id      string
	ready   bool
	attempt uint32
	created int64
	running int
}

func (c sandboxCandidate) newerThan(o sandboxCandidate) bool {
	return c.attempt > o.attempt || (c.attempt == o.attempt && c.created > o.created)
}

// pickSandbox chooses the sandbox a pod works on: the ready one running
// the most containers (the newest among equals), or the newest when none
// is ready. A pod normally has one ready sandbox; a second is a stale
// duplicate (a crash between creating a sandbox and recording it), and
// preferring the one that runs the containers keeps them running where a
// newest-wins rule would start them again in the empty one. It returns
// the index chosen (-1 for none), the other ready sandboxes (to remove
// while the pod keeps its own) and every other sandbox.
func pickSandbox(cands []sandboxCandidate) (chosen int, staleReady, others []string) {
	chosen = -1
	for i, c := range cands {
		if chosen < 0 {
			chosen = i
			continue
		}
		best := cands[chosen]
		switch {
		case c.ready != best.ready:
			if c.ready {
				chosen = i
			}
		case c.running != best.running:
			if c.running > best.running {
				chosen = i
			}
		case c.newerThan(best):
			chosen = i
		}
	}
	for i, c := range cands {
		if i == chosen {
			continue
		}
		others = append(others, c.id)
		if c.ready {
			staleReady = append(staleReady, c.id)
		}
	}
	return chosen, staleReady, others
}
