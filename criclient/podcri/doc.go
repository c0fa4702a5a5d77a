// Package podcri converts a Kubernetes pod into the CRI configs the kubelet
// sends a container runtime: SandboxConfig for RunPodSandbox and
// ContainerConfig for CreateContainer, with the kubelet's labels,
// annotations, log paths, namespace options, resources and security
// context. ContainerHash is a stable hash of a container spec, used to
// detect spec changes.
//
// Volumes: given where each pod volume lives on the host (WithVolumes, a
// Volume per name, VolumeAt for the kubelet's attributes of its kind),
// ContainerConfig turns the container's volumeMounts into CRI mounts as
// the kubelet does (Mounts: readOnly, subPath checks, mount propagation,
// SELinux relabelling); VolumeFiles is the content the kubelet writes
// into a downwardAPI volume. Setting volumes up is the caller's.
//
// The conversions are pure: they read the pod and write nothing, create no
// directory and call no runtime. What needs the API server is refused: an
// env variable or envFrom with an *EnvError (unless the caller resolves
// them, WithEnvObjects), a secret, configMap or service-account-token
// volume source with a *VolumeError; a mount that cannot be made is a
// *MountError.
//
// The package sits under criclient because it is the pod side of the same
// protocol: criclient carries CRI messages, podcri writes and reads them
// for a Kubernetes pod. It imports neither criclient nor any sibling, only
// cri-api and k8s.io/api, so a custom kubelet can take it alone.
package podcri
