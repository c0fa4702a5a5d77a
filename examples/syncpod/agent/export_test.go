package agent

// Quiescent exposes quiescent to the external tests.
func (a *Agent) Quiescent() bool { return a.quiescent() }

// CheckHostPath exposes checkHostPath to the external tests.
var CheckHostPath = checkHostPath
