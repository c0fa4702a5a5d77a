package podcri

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestMisuse(t *testing.T) {
	pod := testPod()
	var ae *ArgError
	if _, err := SandboxConfig(nil); !errors.As(err, &ae) || ae.Arg != "pod" {
		t.Errorf("nil pod: %v", err)
	}
	if _, err := ContainerConfig(nil, &pod.Spec.Containers[0]); !errors.As(err, &ae) || ae.Arg != "pod" {
		t.Errorf("nil pod: %v", err)
	}
	if _, err := ContainerConfig(pod, nil); !errors.As(err, &ae) || ae.Arg != "container" {
		t.Errorf("nil container: %v", err)
	}
	if _, err := ContainerConfig(pod, &corev1.Container{Name: "ghost"}); !errors.As(err, &ae) || ae.Arg != "container" {
		t.Errorf("container not in pod: %v", err)
	}
	if _, err := Env(nil, nil, "", ""); !errors.As(err, &ae) {
		t.Errorf("Env nil pod: %v", err)
	}
	if _, err := Env(pod, nil, "", ""); !errors.As(err, &ae) {
		t.Errorf("Env nil container: %v", err)
	}
	var ce *ConfigError
	for _, n := range []int64{0, -1} {
		if _, err := ContainerConfig(pod, &pod.Spec.Containers[0], WithNodeMemoryCapacity(n)); !errors.As(err, &ce) || ce.Option != "WithNodeMemoryCapacity" {
			t.Errorf("node memory %d: %v", n, err)
		}
	}
	if got := (&ConfigError{Option: "WithX", Reason: "bad"}).Error(); got != "podcri: WithX: bad" {
		t.Errorf("ConfigError message %q", got)
	}
	if got := (&ArgError{Method: "ContainerConfig", Arg: "pod", Reason: "must not be nil"}).Error(); got != "podcri: ContainerConfig: pod must not be nil" {
		t.Errorf("ArgError message %q", got)
	}
	if r := Resources(nil, nil, 0); r.CpuShares != MinShares {
		t.Errorf("nil container resources %v", r)
	}
	if ns := NamespaceOptions(nil); ns == nil {
		t.Error("nil pod namespace options")
	}
	_ = SecurityContext(nil, nil)
	if (&EnvError{Container: "a", Reason: "r"}).Error() == "" {
		t.Error("empty EnvError message")
	}
	if _, err := Mounts(nil, nil, false); !errors.As(err, &ae) || ae.Arg != "container" {
		t.Errorf("Mounts nil container: %v", err)
	}
	if _, err := VolumeFiles(nil, &corev1.Volume{}); !errors.As(err, &ae) || ae.Arg != "pod" {
		t.Errorf("VolumeFiles nil pod: %v", err)
	}
	if _, err := VolumeFiles(pod, nil); !errors.As(err, &ae) || ae.Arg != "volume" {
		t.Errorf("VolumeFiles nil volume: %v", err)
	}
	if got := (&MountError{Container: "app", Volume: "v", Reason: "r"}).Error(); got != `podcri: container "app": volumeMount "v": r` {
		t.Errorf("MountError message %q", got)
	}
	if got := (&VolumeError{Volume: "v", Reason: "r"}).Error(); got != `podcri: volume "v": r` {
		t.Errorf("VolumeError message %q", got)
	}
	// An empty pod (no containers at all) fails typed, no panic.
	if _, err := ContainerConfig(&corev1.Pod{}, &corev1.Container{}); !errors.As(err, &ae) {
		t.Errorf("empty pod: %v", err)
	}
}
