package agent

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
)

// eventInvalidEnvNames: keys of an envFrom source were skipped because,
// prefixed, they are not valid variable names (Container; Err lists
// them), the kubelet's InvalidEnvironmentVariableNames event.
const eventInvalidEnvNames = "InvalidEnvironmentVariableNames"

// envObjects is what resolves the env of the container name of pod that
// needs the API server (configMapKeyRef, secretKeyRef, envFrom), read
// from the agent's PodResources within resourceTimeout; nil without one
// (podcri then refuses such variables). Call done when the container's
// config is made.
func (a *Agent) envObjects(pod *corev1.Pod, container string) (objs *podObjects, done func()) {
	m := a.volumes
	if m.res == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(m.ctx, resourceTimeout)
	objs = newPodObjects(ctx, m.res, pod.Namespace)
	objs.invalid = func(kind, name string, keys []string) {
		err := fmt.Errorf("keys [%s] from the EnvFrom %s %s/%s were skipped since they are considered invalid environment variable names",
			strings.Join(keys, ", "), kind, pod.Namespace, name)
		a.log.Warn(eventInvalidEnvNames, zap.String("pod", podKey(pod)), zap.String("container", container), zap.Error(err))
		a.emit(Event{Type: eventInvalidEnvNames, Pod: podKey(pod), Container: container, Err: err})
	}
	return objs, cancel
}
