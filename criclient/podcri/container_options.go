package podcri

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// ContainerOption sets a ContainerConfig parameter. A nil ContainerOption
// is ignored.
type ContainerOption func(*containerSettings)

type containerSettings struct {
	restartCount     uint32
	imageRef         string
	mounts           []*runtimeapi.Mount
	terminationPath  string
	hostIP, podIP    string
	nodeMemory       int64
	nodeMemorySet    bool
	namespaceOptions *runtimeapi.NamespaceOption
	volumes          map[string]Volume
	volumesSet       bool
	selinux          bool
	envObjects       EnvObjects
}

// DefaultNodeMemoryCapacity is the node memory capacity the Burstable
// OomScoreAdj formula uses without WithNodeMemoryCapacity: 8 GiB.
const DefaultNodeMemoryCapacity int64 = 8 << 30

// WithRestartCount sets the container's attempt and restart count: 0 for
// its first run. It names the log file (<name>/<count>.log) and the
// io.kubernetes.container.restartCount annotation.
func WithRestartCount(n uint32) ContainerOption {
	return func(s *containerSettings) { s.restartCount = n }
}

// WithImageRef sets the resolved image reference (the image ID a pull
// returned) for ImageSpec.Image; without it Image is the container's image
// as written.
func WithImageRef(ref string) ContainerOption { return func(s *containerSettings) { s.imageRef = ref } }

// WithMounts adds mounts, in order, after the volume mounts (WithVolumes)
// and before the termination-message mount.
func WithMounts(m ...*runtimeapi.Mount) ContainerOption {
	return func(s *containerSettings) { s.mounts = append(s.mounts, m...) }
}

// WithVolumes converts the container's volumeMounts into CRI mounts (see
// Mounts), given where each pod volume lives on the host, by volume name.
// Without it the volumeMounts are ignored (a caller may pass its own with
// WithMounts); with it, a mount naming a volume that volumes lacks fails
// ContainerConfig with a *MountError.
func WithVolumes(volumes map[string]Volume) ContainerOption {
	return func(s *containerSettings) { s.volumes, s.volumesSet = volumes, true }
}

// WithSELinux tells whether the host runs SELinux: when it does, the
// mounts of volumes that ask for it (Volume.SELinuxRelabel) and the
// termination-message file are relabelled by the runtime, as the kubelet
// asks (it checks the host the same way). Default false.
func WithSELinux(enabled bool) ContainerOption {
	return func(s *containerSettings) { s.selinux = enabled }
}

// WithTerminationMessageHostPath mounts the host file path at the
// container's terminationMessagePath (default /dev/termination-log), as the
// kubelet does so the container can write why it ended.
func WithTerminationMessageHostPath(path string) ContainerOption {
	return func(s *containerSettings) { s.terminationPath = path }
}

// WithPodIPs supplies status.hostIP and status.podIP for the downward-API
// env fields; without it those fields are an *EnvError.
func WithPodIPs(hostIP, podIP string) ContainerOption {
	return func(s *containerSettings) { s.hostIP, s.podIP = hostIP, podIP }
}

// WithNodeMemoryCapacity sets the node memory capacity in bytes for the
// Burstable OomScoreAdj formula (default DefaultNodeMemoryCapacity). A
// value that is not positive is a *ConfigError.
func WithNodeMemoryCapacity(bytes int64) ContainerOption {
	return func(s *containerSettings) { s.nodeMemory, s.nodeMemorySet = bytes, true }
}

// WithNamespaceOptions sets the container's namespace options, which
// should match its sandbox's (NamespaceOptions(pod) by default).
func WithNamespaceOptions(ns *runtimeapi.NamespaceOption) ContainerOption {
	return func(s *containerSettings) { s.namespaceOptions = ns }
}

// WithEnvObjects resolves the env values that need the API server from
// objs, as the kubelet does: valueFrom configMapKeyRef and secretKeyRef
// (a missing object or key is an *EnvError unless the reference is
// optional, when the variable is left out) and envFrom (see EnvObjects;
// env wins over envFrom). Without it they are an *EnvError. A nil objs
// is ignored; a typed-nil one is a *ConfigError.
func WithEnvObjects(objs EnvObjects) ContainerOption {
	return func(s *containerSettings) {
		if objs != nil {
			s.envObjects = objs
		}
	}
}
