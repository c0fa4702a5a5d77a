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

// MountError is a volumeMount of a container that cannot become a CRI
// mount: it names a volume WithVolumes did not give, its subPath is
// absolute or has a ".." element, its mountPropagation is unknown or
// Bidirectional in an unprivileged container, or it uses what podcri does
// not support (subPathExpr, volumeDevices). Volume is the mount's volume
// name.
type MountError struct {
	Container, Volume, Reason string
}

func (e *MountError) Error() string {
	return fmt.Sprintf("podcri: container %q: volumeMount %q: %s", e.Container, e.Volume, e.Reason)
}

// VolumeError is a pod volume whose files podcri cannot produce (see
// VolumeFiles): a field or source that needs the API server or that the
// downward API does not have, or a bad item path.
type VolumeError struct {
	Volume, Reason string
}

func (e *VolumeError) Error() string {
	return fmt.Sprintf("podcri: volume %q: %s", e.Volume, e.Reason)
}
