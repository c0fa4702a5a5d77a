package crifilter

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// Sandbox is what a PodSandboxFilter looks at in a pod sandbox.
type Sandbox struct {
	// ID is the sandbox's full ID.
	ID string
	// State is the sandbox's state.
	State runtimeapi.PodSandboxState
	// Labels are the sandbox's labels.
	Labels map[string]string
}

// Container is what a ContainerFilter looks at in a container.
type Container struct {
	// ID is the container's full ID.
	ID string
	// PodSandboxID is the full ID of the container's sandbox.
	PodSandboxID string
	// State is the container's state.
	State runtimeapi.ContainerState
	// Labels are the container's labels.
	Labels map[string]string
}

// SandboxOf is the part of a listed sandbox a filter looks at.
func SandboxOf(s *runtimeapi.PodSandbox) Sandbox {
	return Sandbox{ID: s.GetId(), State: s.GetState(), Labels: s.GetLabels()}
}

// ContainerOf is the part of a listed container a filter looks at.
func ContainerOf(c *runtimeapi.Container) Container {
	return Container{ID: c.GetId(), PodSandboxID: c.GetPodSandboxId(), State: c.GetState(), Labels: c.GetLabels()}
}

// MatchSandbox reports whether s passes f, where id is f's Id as resolved
// by the caller ("" when f has none). f's own Id is not read, so an
// unresolved prefix never matches by accident.
func MatchSandbox(f *runtimeapi.PodSandboxFilter, id string, s Sandbox) bool {
	if id != "" && s.ID != id {
		return false
	}
	if st := f.GetState(); st != nil && st.GetState() != s.State {
		return false
	}
	return LabelsMatch(f.GetLabelSelector(), s.Labels)
}

// MatchContainer reports whether c passes f, where id and podSandboxID are
// f's Id and PodSandboxId as resolved by the caller ("" when unset). f's
// own Id and PodSandboxId are not read.
func MatchContainer(f *runtimeapi.ContainerFilter, id, podSandboxID string, c Container) bool {
	if id != "" && c.ID != id {
		return false
	}
	if podSandboxID != "" && c.PodSandboxID != podSandboxID {
		return false
	}
	if st := f.GetState(); st != nil && st.GetState() != c.State {
		return false
	}
	return LabelsMatch(f.GetLabelSelector(), c.Labels)
}

// LabelsMatch reports whether labels hold every key of selector with an
// equal value. An empty selector matches everything.
func LabelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
