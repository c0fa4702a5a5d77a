package podcri

import "fmt"

// ConfigError is an option that cannot be used.
type ConfigError struct{ Option, Reason string }

func (e *ConfigError) Error() string { return "podcri: " + e.Option + ": " + e.Reason }

// ArgError is a bad argument to a function: a nil pod or container, or a
// container that is not in the pod.
type ArgError struct{ Method, Arg, Reason string }

func (e *ArgError) Error() string {
	return "podcri: " + e.Method + ": " + e.Arg + " " + e.Reason
}

// EnvError is an environment variable of a container that podcri cannot
// resolve: a valueFrom that needs the API server (configMapKeyRef,
// secretKeyRef), an unsupported field path, or envFrom. Variable is empty
// for envFrom.
type EnvError struct {
	Container, Variable, Reason string
}

func (e *EnvError) Error() string {
	if e.Variable == "" {
		return fmt.Sprintf("podcri: container %q: %s", e.Container, e.Reason)
	}
	return fmt.Sprintf("podcri: container %q: env %s: %s", e.Container, e.Variable, e.Reason)
}
