package agent

import "k8s.io/apimachinery/pkg/types"

// Quiescent exposes quiescent to the external tests.
func (a *Agent) Quiescent() bool { return a.quiescent() }

// ProbeState exposes probeState to the external tests.
func (a *Agent) ProbeState(uid types.UID, name, id string) (started, ready bool) {
	return a.probeState(uid, name, id)
}

// CheckHostPath exposes checkHostPath to the external tests.
var CheckHostPath = checkHostPath
