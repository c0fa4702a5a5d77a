package agent

import "k8s.io/apimachinery/pkg/types"

// podStatusChanged tells the status subscribers that what the agent
// reports of pod uid may have changed (a probe result, a waiting reason).
func (a *Agent) podStatusChanged(uid types.UID) {}
