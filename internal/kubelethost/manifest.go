package kubelethost

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// WriteStaticPod writes pod as a manifest into ManifestDir (file
// pod.Name + ".json", replacing an earlier one), where the kubelet picks it
// up. The file is written under another name and renamed, so the kubelet
// never reads half of it. Kind and apiVersion are filled in when empty.
func (k *Kubelet) WriteStaticPod(pod *corev1.Pod) error {
	if pod == nil {
		return &ArgError{Method: "WriteStaticPod", Arg: "pod", Reason: "must not be nil"}
	}
	if err := checkName("WriteStaticPod", pod.Name); err != nil {
		return err
	}
	if err := k.usable(); err != nil {
		return err
	}
	p := pod.DeepCopy()
	if p.Kind == "" {
		p.Kind = "Pod"
	}
	if p.APIVersion == "" {
		p.APIVersion = "v1"
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("kubelethost: WriteStaticPod %s: %w", pod.Name, err)
	}
	// The kubelet ignores dot files, so the half-written one is never read.
	tmp := filepath.Join(k.ManifestDir, "."+pod.Name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("kubelethost: WriteStaticPod %s: %w", pod.Name, err)
	}
	if err := os.Rename(tmp, k.manifestPath(pod.Name)); err != nil {
		return fmt.Errorf("kubelethost: WriteStaticPod %s: %w", pod.Name, err)
	}
	return nil
}

// RemoveStaticPod deletes the manifest of the pod name; the kubelet then
// stops the pod. Removing a manifest that is not there is not an error.
func (k *Kubelet) RemoveStaticPod(name string) error {
	if err := checkName("RemoveStaticPod", name); err != nil {
		return err
	}
	if err := k.usable(); err != nil {
		return err
	}
	if err := os.Remove(k.manifestPath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("kubelethost: RemoveStaticPod %s: %w", name, err)
	}
	return nil
}

// PodName is the name the kubelet gives the static pod name: its name with
// "-" and the node name appended (what the runtime sees as the sandbox's
// metadata name).
func (k *Kubelet) PodName(name string) string { return name + "-" + k.NodeName }

func (k *Kubelet) manifestPath(name string) string {
	return filepath.Join(k.ManifestDir, name+".json")
}

func checkName(method, name string) error {
	if name == "" {
		return &ArgError{Method: method, Arg: "name", Reason: "must not be empty"}
	}
	if name != filepath.Base(name) || name[0] == '.' {
		return &ArgError{Method: method, Arg: "name", Reason: fmt.Sprintf("%q must be a plain file name", name)}
	}
	return nil
}
