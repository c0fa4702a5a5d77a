package agent

import "k8s.io/apimachinery/pkg/types"

// probeState reports what the probes say of the running container id
// (container name of pod uid): started is its startup probe's verdict
// (true without one), ready its readiness (true without a probe, once
// started). The status builder calls it for every running container. It
// never waits for a probe.
func (a *Agent) probeState(uid types.UID, name, id string) (started, ready bool) {
	return a.prober.state(uid, name, id)
}
