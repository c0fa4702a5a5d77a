package podcri

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/typednil"
)

// ContainerConfig is the CRI config of container c of pod, as the kubelet
// builds it. c must point into pod.Spec.Containers, InitContainers or
// EphemeralContainers (by identity, or by a name found there).
//
//   - Metadata: the container's name; Attempt is the restart count
//     (WithRestartCount).
//   - Image: UserSpecifiedImage is c.Image; Image is WithImageRef's ref, or
//     c.Image without it.
//   - Command and Args as given: the runtime applies the image's rules (no
//     command runs the image's entrypoint with args, or the image's cmd when
//     args are empty too; a command replaces the entrypoint and the image's
//     cmd is dropped).
//   - Envs: values, and the downward-API fields a static pod can use (see
//     Env); anything else is an *EnvError.
//   - Labels: io.kubernetes.pod.name, .namespace, .uid and
//     io.kubernetes.container.name.
//   - Annotations: container hash, restart count, termination message path
//     and policy, the pod's termination grace period, and the ports as JSON.
//   - LogPath: <name>/<restart count>.log, relative to the sandbox's
//     LogDirectory.
//   - Mounts: the volume mounts (WithVolumes, see Mounts), WithMounts,
//     then the termination-message file (WithTerminationMessageHostPath).
//   - Linux: resources (see Resources), security context (see
//     SecurityContext) and namespace options (WithNamespaceOptions).
func ContainerConfig(pod *corev1.Pod, c *corev1.Container, opts ...ContainerOption) (*runtimeapi.ContainerConfig, error) {
	const method = "ContainerConfig"
	if pod == nil {
		return nil, &ArgError{Method: method, Arg: "pod", Reason: "must not be nil"}
	}
	if c == nil {
		return nil, &ArgError{Method: method, Arg: "container", Reason: "must not be nil"}
	}
	if !inPod(pod, c) {
		return nil, &ArgError{Method: method, Arg: "container", Reason: fmt.Sprintf("%q is not in pod %s/%s", c.Name, pod.Namespace, pod.Name)}
	}
	s := containerSettings{nodeMemory: DefaultNodeMemoryCapacity}
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	if s.nodeMemorySet && s.nodeMemory <= 0 {
		return nil, &ConfigError{Option: "WithNodeMemoryCapacity", Reason: fmt.Sprintf("%d is not positive", s.nodeMemory)}
	}
	if s.envObjects != nil && typednil.Is(s.envObjects) {
		return nil, &ConfigError{Option: "WithEnvObjects", Reason: "must not be nil"}
	}
	envs, err := env(method, pod, c, s.hostIP, s.podIP, s.envObjects)
	if err != nil {
		return nil, err
	}
	image := c.Image
	if s.imageRef != "" {
		image = s.imageRef
	}
	annotations := map[string]string{
		AnnotationContainerHash:                     ContainerHash(c),
		AnnotationContainerRestartCount:             strconv.FormatUint(uint64(s.restartCount), 10),
		AnnotationContainerTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationContainerTerminationMessagePolicy: string(c.TerminationMessagePolicy),
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		annotations[AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	if len(c.Ports) > 0 {
		b, _ := json.Marshal(c.Ports) // []corev1.ContainerPort always marshals
		annotations[AnnotationContainerPorts] = string(b)
	}
	var mounts []*runtimeapi.Mount
	if s.volumesSet {
		if mounts, err = Mounts(c, s.volumes, s.selinux); err != nil {
			return nil, err
		}
	}
	mounts = append(mounts, s.mounts...)
	if s.terminationPath != "" {
		target := c.TerminationMessagePath
		if target == "" {
			target = corev1.TerminationMessagePathDefault
		}
		mounts = append(mounts, &runtimeapi.Mount{HostPath: s.terminationPath, ContainerPath: target, SelinuxRelabel: s.selinux})
	}
	ns := s.namespaceOptions
	if ns == nil {
		ns = NamespaceOptions(pod)
	}
	sc := SecurityContext(pod, c)
	sc.NamespaceOptions = ns
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: s.restartCount},
		Image:    &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image},
		Command:  c.Command, Args: c.Args, WorkingDir: c.WorkingDir,
		Envs: envs,
		Labels: map[string]string{
			LabelPodName: pod.Name, LabelPodNamespace: pod.Namespace, LabelPodUID: string(pod.UID),
			LabelContainerName: c.Name,
		},
		Annotations: annotations,
		LogPath:     filepath.Join(c.Name, strconv.FormatUint(uint64(s.restartCount), 10)+".log"),
		Mounts:      mounts,
		Stdin:       c.Stdin, StdinOnce: c.StdinOnce, Tty: c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       Resources(pod, c, s.nodeMemory),
			SecurityContext: sc,
		},
	}, nil
}

func inPod(pod *corev1.Pod, c *corev1.Container) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if &cs[i] == c || cs[i].Name == c.Name {
				return true
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		e := &pod.Spec.EphemeralContainers[i]
		if e.Name == c.Name {
			return true
		}
	}
	return false
}
