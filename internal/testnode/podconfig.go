package testnode

import (
	"os"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodNamespace is the Kubernetes namespace SandboxConfig puts pods in.
const PodNamespace = "testnode"

// hostNamespaces runs in the node's network namespace: the node has no CNI,
// and containerd cannot give a pod its own network without one.
func hostNamespaces() *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_NODE,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
}

// SandboxConfig returns a pod sandbox config that runs on this node: the
// node's network namespace (so no hostname: runc cannot set one without a
// private UTS namespace), a log directory under Node.Dir (created here),
// and metadata name/uid in namespace PodNamespace. Callers may change it
// before RunPodSandbox.
func (n *Node) SandboxConfig(name, uid string) *runtimeapi.PodSandboxConfig {
	logDir := n.path("pods", PodNamespace+"_"+name+"_"+uid)
	_ = os.MkdirAll(logDir, 0o755) // RunPodSandbox reports a missing dir
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      name,
			Uid:       uid,
			Namespace: PodNamespace,
		},
		LogDirectory: logDir,
		Labels:       map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.uid": uid},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: hostNamespaces(),
			},
		},
	}
}

// ContainerConfig returns a container config for image (a reference from
// PushImage) whose args replace the image's default ("pause"): steps of
// the workload program, e.g. "echo", "hi", "exit", "3". The container logs
// to "<name>.log" in the sandbox's LogDirectory; pass the sandbox config
// from SandboxConfig to CreateContainer.
func (n *Node) ContainerConfig(name, image string, args ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Args:     args,
		LogPath:  name + ".log",
		Labels:   map[string]string{"io.kubernetes.container.name": name},
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: hostNamespaces(),
			},
		},
	}
}

// ContainerLogPath is where the container named name of the pod made from
// sandbox writes its output (containerd's CRI log format: one
// "TIMESTAMP STREAM TAG TEXT" line per line of output).
func ContainerLogPath(sandbox *runtimeapi.PodSandboxConfig, name string) string {
	return filepath.Join(sandbox.GetLogDirectory(), name+".log")
}
