package agent

import (
	"encoding/base64"
	"encoding/json"
	"net"
	"path"
	"sort"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// keyring is the registry credentials of one pod's imagePullSecrets,
// matched to an image as the kubelet's keyring does, simplified: an entry
// is a registry (host, optional port, optional path prefix; a host label
// may be a "*" glob, as in *.example.com), the docker.io aliases
// (index.docker.io, registry-1.docker.io, https://index.docker.io/v1/)
// are one; an image matches an entry of the same host (each label
// against its glob), the same port, and a path prefix of its repository.
// The most specific entry wins (the longest), then the first secret
// listed; the kubelet would try every match in turn, the agent uses the
// first only.
type keyring struct {
	entries []keyEntry
}

type keyEntry struct {
	host, port, path string // the entry's registry, its host lower-cased
	auth             *runtimeapi.AuthConfig
	order            int // secret order, then key order, for ties
}

// dockerConfigEntry is one registry's entry in a docker config.
type dockerConfigEntry struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// pullKeyring reads pod's imagePullSecrets (types kubernetes.io/dockerconfigjson
// and kubernetes.io/dockercfg). Like the kubelet, a secret that cannot be
// read or parsed is skipped with a warning (the pull may then fail); no
// credential is ever logged.
func (m *volumeManager) pullKeyring(pod *corev1.Pod, objs *podObjects) *keyring {
	kr := &keyring{}
	for i, ref := range pod.Spec.ImagePullSecrets {
		s, err := objs.secret(ref.Name)
		if err != nil || s == nil {
			m.log.Warn("unable to retrieve pull secret, the image pull may not succeed",
				zap.String("pod", podKey(pod)), zap.String("secret", ref.Name), zap.Error(err))
			continue
		}
		entries, ok := parseDockerConfig(secretData(s))
		if !ok {
			m.log.Warn("pull secret is not a docker config, skipped", zap.String("pod", podKey(pod)), zap.String("secret", ref.Name))
			continue
		}
		keys := make([]string, 0, len(entries))
		for k := range entries {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for j, k := range keys {
			e := entries[k]
			host, port, p := parseRegistry(k)
			if host == "" {
				continue
			}
			a := &runtimeapi.AuthConfig{Username: e.Username, Password: e.Password, Auth: e.Auth,
				ServerAddress: k, IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken}
			if a.Username == "" && e.Auth != "" {
				if dec, err := base64.StdEncoding.DecodeString(e.Auth); err == nil {
					if u, pw, ok := strings.Cut(string(dec), ":"); ok {
						a.Username, a.Password = u, pw
					}
				}
			}
			kr.entries = append(kr.entries, keyEntry{host: host, port: port, path: p, auth: a, order: i*10000 + j})
		}
	}
	sortKeyring(kr)
	return kr
}

// sortKeyring puts the most specific entries first (the longest), then
// the earlier secrets'.
func sortKeyring(kr *keyring) {
	sort.SliceStable(kr.entries, func(i, j int) bool {
		a, b := kr.entries[i], kr.entries[j]
		la, lb := len(a.host)+len(a.port)+len(a.path), len(b.host)+len(b.port)+len(b.path)
		if la != lb {
			return la > lb
		}
		return a.order < b.order
	})
}

// parseDockerConfig reads a secret's .dockerconfigjson ({"auths": {...}})
// or .dockercfg ({...}).
func parseDockerConfig(data map[string][]byte) (map[string]dockerConfigEntry, bool) {
	if b, ok := data[corev1.DockerConfigJsonKey]; ok {
		var cfg struct {
			Auths map[string]dockerConfigEntry `json:"auths"`
		}
		if json.Unmarshal(b, &cfg) != nil {
			return nil, false
		}
		return cfg.Auths, true
	}
	if b, ok := data[corev1.DockerConfigKey]; ok {
		var cfg map[string]dockerConfigEntry
		if json.Unmarshal(b, &cfg) != nil {
			return nil, false
		}
		return cfg, true
	}
	return nil, false
}

// parseRegistry splits a docker config key ("https://reg.example:5000/v1/",
// "*.example.com/team") into its lower-cased host, port and path, the
// docker.io aliases made "docker.io".
func parseRegistry(key string) (host, port, p string) {
	k := key
	if i := strings.Index(k, "://"); i >= 0 {
		k = k[i+3:]
	}
	hostport, p, _ := strings.Cut(k, "/")
	p = strings.TrimSuffix(p, "/")
	if p == "v1" || p == "v2" || strings.HasPrefix(p, "v1/") || strings.HasPrefix(p, "v2/") {
		p = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(p, "v1"), "v2"), "/")
	}
	host = hostport
	if h, pt, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, pt
	}
	host = strings.ToLower(host)
	switch host {
	case "index.docker.io", "registry-1.docker.io", "docker.io":
		host = "docker.io"
	}
	return host, port, p
}

// imageRegistry splits image into its registry host, port and repository
// path, as a reference is resolved: a first element without a dot or a
// colon (and not localhost) is a docker.io repository (library/ added to
// a one-element name).
func imageRegistry(image string) (host, port, repo string) {
	name := image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, ':'); i >= 0 && !strings.Contains(name[i:], "/") {
		name = name[:i]
	}
	first, rest, found := strings.Cut(name, "/")
	if !found || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		if !found {
			return "docker.io", "", "library/" + name
		}
		return "docker.io", "", name
	}
	host = first
	if h, pt, err := net.SplitHostPort(first); err == nil {
		host, port = h, pt
	}
	host = strings.ToLower(host)
	if host == "index.docker.io" || host == "registry-1.docker.io" {
		host = "docker.io"
	}
	return host, port, rest
}

// hostMatches matches host against a pattern whose labels may be globs.
func hostMatches(pattern, host string) bool {
	pl, hl := strings.Split(pattern, "."), strings.Split(host, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if ok, err := path.Match(pl[i], hl[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// lookup is the credential for image, nil when no entry matches.
func (k *keyring) lookup(image string) *runtimeapi.AuthConfig {
	if k == nil {
		return nil
	}
	host, port, repo := imageRegistry(image)
	for _, e := range k.entries {
		if e.port != port || !hostMatches(e.host, host) {
			continue
		}
		if e.path != "" && repo != e.path && !strings.HasPrefix(repo, e.path+"/") {
			continue
		}
		return e.auth
	}
	return nil
}

// pullAuth is the credential of the pod of uid for image, from the
// keyring its last set-up read; known is false when pod (nil: not
// known to the caller) has pull secrets that no set-up has read yet (its
// prefetch then waits for its sync, which pulls with them).
func (m *volumeManager) pullAuth(pod *corev1.Pod, uid types.UID, image string) (auth *runtimeapi.AuthConfig, known bool) {
	if m.res == nil {
		return nil, true
	}
	m.mu.Lock()
	kr, ok := m.keyrings[uid]
	m.mu.Unlock()
	if !ok {
		return nil, pod == nil || len(pod.Spec.ImagePullSecrets) == 0
	}
	return kr.lookup(image), true
}

// setKeyring records the keyring of the pod of uid.
func (m *volumeManager) setKeyring(uid types.UID, kr *keyring) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keyrings == nil {
		m.keyrings = map[types.UID]*keyring{}
	}
	m.keyrings[uid] = kr
}
