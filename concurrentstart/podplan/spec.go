package podplan

import (
	"fmt"

	"github.com/syncpod/syncpod/concurrentstart"
	corev1 "k8s.io/api/core/v1"
)

// validateSpec checks what Build relies on in the pod's spec, in spec
// order, init containers first: every container has a name, no two share
// one (they are node names), and a restartPolicy, if set, is one Build
// knows (Always makes an init container a sidecar; OnFailure and Never
// leave it a regular init container).
func validateSpec(pod *corev1.Pod) error {
	type place struct {
		path  string
		index int // position among all containers, as a plan node
	}
	seen := map[string]place{}
	n := 0
	check := func(list string, cs []corev1.Container) error {
		for i := range cs {
			c := &cs[i]
			path := fmt.Sprintf("pod.spec.%s[%d]", list, i)
			if c.Name == "" {
				return &ConfigError{Option: path + ".name", Reason: "must not be empty"}
			}
			if first, dup := seen[c.Name]; dup {
				return &ConfigError{
					Option: path + ".name",
					Reason: fmt.Sprintf("%q is also the name of %s", c.Name, first.path),
					cause:  &concurrentstart.DuplicateNodeError{Name: c.Name, First: first.index, Second: n},
				}
			}
			seen[c.Name] = place{path: path, index: n}
			n++
			if p := c.RestartPolicy; p != nil {
				switch *p {
				case corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever:
				default:
					return &ConfigError{
						Option: path + ".restartPolicy",
						Reason: fmt.Sprintf("%q (container %q) is not Always, OnFailure or Never", string(*p), c.Name),
					}
				}
			}
		}
		return nil
	}
	if err := check("initContainers", pod.Spec.InitContainers); err != nil {
		return err
	}
	return check("containers", pod.Spec.Containers)
}
