package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
)

// The kubelet's plugin directories of the volumes made from API objects.
const (
	configMapPlugin = "kubernetes.io~configmap"
	secretPlugin    = "kubernetes.io~secret"
)

// sourceFiles is the content of a configMap, secret or projected volume,
// as the kubelet's plugins make it (MakePayload), sorted by path:
//
//   - without items, every key of the object (a configMap's data and
//     binaryData) is a file of that name; with items, each item's key is
//     the file at its path, and a key the object lacks fails the volume
//     unless the source is optional, when it is left out;
//   - a missing object fails the volume, or, optional, gives no files;
//   - mode: the item's, else the volume's defaultMode (0644 by default);
//   - projected: its sources' files together (configMap, secret,
//     downwardAPI, serviceAccountToken, whose token the agent keeps and
//     rotates, see tokens); a later file of one path replaces an earlier
//     one.
func (m *volumeManager) sourceFiles(ctx context.Context, pod *corev1.Pod, v *corev1.Volume, objs *podObjects) ([]podcri.File, error) {
	files := map[string]podcri.File{}
	add := func(p string, data []byte, mode int32) error {
		if err := checkFilePath(p); err != nil {
			return err
		}
		p = filepath.Clean(p)
		files[p] = podcri.File{Path: p, Data: data, Mode: os.FileMode(mode) & os.ModePerm}
		return nil
	}
	src := v.VolumeSource
	switch {
	case src.ConfigMap != nil:
		cm := src.ConfigMap
		if err := m.configMapFiles(objs, cm.Name, cm.Items, ptrTrue(cm.Optional), modeOr(cm.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode), add); err != nil {
			return nil, err
		}
	case src.Secret != nil:
		s := src.Secret
		if err := m.secretFiles(objs, s.SecretName, s.Items, ptrTrue(s.Optional), modeOr(s.DefaultMode, corev1.SecretVolumeSourceDefaultMode), add); err != nil {
			return nil, err
		}
	case src.Projected != nil:
		mode := modeOr(src.Projected.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode)
		for i, ps := range src.Projected.Sources {
			var err error
			switch {
			case ps.ConfigMap != nil:
				err = m.configMapFiles(objs, ps.ConfigMap.Name, ps.ConfigMap.Items, ptrTrue(ps.ConfigMap.Optional), mode, add)
			case ps.Secret != nil:
				err = m.secretFiles(objs, ps.Secret.Name, ps.Secret.Items, ptrTrue(ps.Secret.Optional), mode, add)
			case ps.DownwardAPI != nil:
				one := &corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{ps}, DefaultMode: &mode}}}
				var fs []podcri.File
				if fs, err = podcri.VolumeFiles(pod, one); err == nil {
					for _, f := range fs {
						files[f.Path] = f
					}
				}
			case ps.ServiceAccountToken != nil:
				var tok string
				if tok, err = m.tokens.token(ctx, pod, ps.ServiceAccountToken); err == nil {
					err = add(ps.ServiceAccountToken.Path, []byte(tok), mode)
				}
			case ps.ClusterTrustBundle != nil:
				err = fmt.Errorf("projected source %d is a clusterTrustBundle, which is not supported", i)
			case ps.PodCertificate != nil:
				err = fmt.Errorf("projected source %d is a podCertificate, which is not supported", i)
			default:
				err = fmt.Errorf("projected source %d is empty", i)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	out := make([]podcri.File, 0, len(files))
	for _, f := range files {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

type addFile func(path string, data []byte, mode int32) error

func (m *volumeManager) configMapFiles(objs *podObjects, name string, items []corev1.KeyToPath, optional bool, mode int32, add addFile) error {
	cm, err := objs.configMap(name)
	if err != nil {
		return fmt.Errorf("configmap %q: %w", name, err)
	}
	if cm == nil {
		if optional {
			return nil
		}
		return fmt.Errorf("configmap %q not found", name)
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles(data, items, optional, mode, "configmap references non-existent config key", add)
}

func (m *volumeManager) secretFiles(objs *podObjects, name string, items []corev1.KeyToPath, optional bool, mode int32, add addFile) error {
	s, err := objs.secret(name)
	if err != nil {
		return fmt.Errorf("secret %q: %w", name, err)
	}
	if s == nil {
		if optional {
			return nil
		}
		return fmt.Errorf("secret %q not found", name)
	}
	return keyFiles(secretData(s), items, optional, mode, "secret references non-existent secret key", add)
}

// keyFiles adds the files of an object's data: every key, or items.
func keyFiles(data map[string][]byte, items []corev1.KeyToPath, optional bool, mode int32, missing string, add addFile) error {
	if len(items) == 0 {
		for k, v := range data {
			if err := add(k, v, mode); err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("%s: %s", missing, it.Key)
		}
		if err := add(it.Path, v, modeOr(it.Mode, mode)); err != nil {
			return fmt.Errorf("item %q: %w", it.Path, err)
		}
	}
	return nil
}

// checkFilePath is the kubelet's rule for the paths written into a
// volume: relative, no ".." element, not starting with "..".
func checkFilePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("path must not be empty")
	case filepath.IsAbs(p):
		return fmt.Errorf("path %q must be relative", p)
	case strings.HasPrefix(p, ".."):
		return fmt.Errorf("path %q must not start with '..'", p)
	}
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return fmt.Errorf("path %q must not contain '..'", p)
		}
	}
	return nil
}

func modeOr(m *int32, def int32) int32 {
	if m != nil {
		return *m
	}
	return def
}

func ptrTrue(b *bool) bool { return b != nil && *b }
