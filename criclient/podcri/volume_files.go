package podcri

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// File is one file of a volume whose content the kubelet writes itself:
// Path is relative to the volume's directory, Mode its permission bits.
type File struct {
	Path string
	Data []byte
	Mode os.FileMode
}

// VolumeFiles is the content of v, a downwardAPI volume or a projected
// volume made of downwardAPI sources, as the kubelet writes it, sorted by
// path:
//
//   - fieldRef metadata.name, metadata.namespace, metadata.uid: the value;
//   - metadata.labels, metadata.annotations: one key="value" line per
//     entry (the value Go-quoted), sorted by key, no final newline;
//   - metadata.labels['k'], metadata.annotations['k']: that value;
//   - resourceFieldRef (containerName required): as the env variable of
//     that container (see Env), its limit or request over the divisor,
//     rounded up; a missing limit, which the kubelet reads as the node's
//     allocatable, is a *VolumeError;
//   - mode: the item's, else the volume's defaultMode, else 0644.
//
// A path that is absolute, has a ".." element or starts with "..", two
// items with one path, another field, and the projected sources that need
// the API server (serviceAccountToken, configMap, secret,
// clusterTrustBundle, podCertificate) are a *VolumeError; so is a volume
// of any other kind. A nil pod is an *ArgError.
func VolumeFiles(pod *corev1.Pod, v *corev1.Volume) ([]File, error) {
	if pod == nil {
		return nil, &ArgError{Method: "VolumeFiles", Arg: "pod", Reason: "must not be nil"}
	}
	if v == nil {
		return nil, &ArgError{Method: "VolumeFiles", Arg: "volume", Reason: "must not be nil"}
	}
	bad := func(format string, args ...any) error {
		return &VolumeError{Volume: v.Name, Reason: fmt.Sprintf(format, args...)}
	}
	var files []File
	seen := map[string]bool{}
	add := func(items []corev1.DownwardAPIVolumeFile, defaultMode *int32, fallback int32) error {
		mode := fallback
		if defaultMode != nil {
			mode = *defaultMode
		}
		for _, it := range items {
			if err := checkItemPath(it.Path); err != nil {
				return bad("item %q: %v", it.Path, err)
			}
			p := filepath.Clean(it.Path)
			if seen[p] {
				return bad("item %q: conflicting duplicate path", it.Path)
			}
			seen[p] = true
			data, err := downwardValue(pod, it)
			if err != nil {
				return bad("item %q: %v", it.Path, err)
			}
			m := mode
			if it.Mode != nil {
				m = *it.Mode
			}
			files = append(files, File{Path: p, Data: []byte(data), Mode: os.FileMode(m) & os.ModePerm})
		}
		return nil
	}
	switch {
	case v.DownwardAPI != nil:
		if err := add(v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, corev1.DownwardAPIVolumeSourceDefaultMode); err != nil {
			return nil, err
		}
	case v.Projected != nil:
		for i, src := range v.Projected.Sources {
			var what string
			switch {
			case src.DownwardAPI != nil:
				if err := add(src.DownwardAPI.Items, v.Projected.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode); err != nil {
					return nil, err
				}
				continue
			case src.ServiceAccountToken != nil:
				what = "serviceAccountToken"
			case src.ConfigMap != nil:
				what = "configMap"
			case src.Secret != nil:
				what = "secret"
			case src.ClusterTrustBundle != nil:
				what = "clusterTrustBundle"
			case src.PodCertificate != nil:
				what = "podCertificate"
			default:
				what = "an empty source"
			}
			return nil, bad("projected source %d is %s, which needs the API server and is not supported", i, what)
		}
	default:
		return nil, bad("not a downwardAPI or projected volume")
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// checkItemPath follows the kubelet's rules for the paths of the files it
// writes into a volume: relative, no ".." element, not starting with "..".
func checkItemPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("path must not be empty")
	case filepath.IsAbs(p):
		return fmt.Errorf("path must be relative")
	case strings.HasPrefix(p, ".."):
		return fmt.Errorf("path must not start with '..'")
	}
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return fmt.Errorf("path must not contain '..'")
		}
	}
	return nil
}

func downwardValue(pod *corev1.Pod, it corev1.DownwardAPIVolumeFile) (string, error) {
	switch {
	case it.FieldRef != nil:
		p := it.FieldRef.FieldPath
		if v, ok := metadataField(pod, p); ok {
			return v, nil
		}
		switch p {
		case "metadata.labels":
			return formatMap(pod.Labels), nil
		case "metadata.annotations":
			return formatMap(pod.Annotations), nil
		}
		return "", fmt.Errorf("fieldRef %q is not supported in a volume", p)
	case it.ResourceFieldRef != nil:
		ref := it.ResourceFieldRef
		if ref.ContainerName == "" {
			return "", fmt.Errorf("resourceFieldRef needs a containerName")
		}
		c := findContainer(pod, ref.ContainerName)
		if c == nil {
			return "", fmt.Errorf("resourceFieldRef: no container %q in the pod", ref.ContainerName)
		}
		return resourceField(c, ref, func(reason string) error { return errors.New(reason) })
	}
	return "", fmt.Errorf("needs a fieldRef or a resourceFieldRef")
}

// formatMap is the downward API's form of labels and annotations.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = fmt.Sprintf("%s=%q", k, m[k])
	}
	return strings.Join(lines, "\n")
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}
