package agent

import "fmt"

// Event types of probes and lifecycle hooks, named after the kubelet's
// event reasons.
const (
	// eventUnhealthy: one probe of a container failed or could not run
	// (Container; Err is a *probeError with the probe's output or error).
	// The verdict changes only after failureThreshold of them in a row.
	eventUnhealthy = "Unhealthy"
	// eventKilling: the agent stops a running container of a pod it keeps
	// (Container, Attempt; Err says why, e.g. "Container app failed
	// liveness probe, will be restarted").
	eventKilling = "Killing"
	// eventFailedPostStartHook: a container's postStart hook failed
	// (Container, Attempt; Err is a *hookError); the container is killed
	// and restarted through the crash-loop back-off.
	eventFailedPostStartHook = "FailedPostStartHook"
	// eventFailedPreStopHook: a container's preStop hook failed or did not
	// end within the grace period (Container; Err is a *hookError); the
	// container is stopped all the same.
	eventFailedPreStopHook = "FailedPreStopHook"
)

// probeError is one failed probe of a container: its output when the
// probe ran and failed, or the error that kept it from running.
type probeError struct {
	Probe     string // "Startup", "Readiness" or "Liveness"
	Container string // the container's name
	Output    string // what the probe said (exec output, HTTP status, connect error)
	Err       error  // set when the probe could not run at all
}

// Error formats the error as the kubelet's event message does.
func (e *probeError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s probe errored: %v", e.Probe, e.Err)
	}
	return fmt.Sprintf("%s probe failed: %s", e.Probe, e.Output)
}

// Unwrap returns Err.
func (e *probeError) Unwrap() error { return e.Err }

// hookError is a lifecycle hook of a container that failed.
type hookError struct {
	Hook      string // "PostStart" or "PreStop"
	Container string // the container's name
	Err       error  // what failed
}

// Error names the hook, the container and the failure.
func (e *hookError) Error() string {
	return fmt.Sprintf("%s hook of container %s failed: %v", e.Hook, e.Container, e.Err)
}

// Unwrap returns Err.
func (e *hookError) Unwrap() error { return e.Err }
