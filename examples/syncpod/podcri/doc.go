// Package podcri converts a Kubernetes pod into the CRI configs the kubelet
// sends a container runtime: SandboxConfig for RunPodSandbox and
// ContainerConfig for CreateContainer, with the kubelet's labels,
// annotations, log paths, namespace options, resources and security
// context. ContainerHash is a stable hash of a container spec, used to
// detect spec changes.
//
// The conversions are pure: they read the pod and write nothing, create no
// directory and call no runtime. Volumes, secrets and config maps are out of
// scope: callers pass mounts in with WithMounts, and an env variable or
// envFrom that needs the API server is refused with an *EnvError.
package podcri
