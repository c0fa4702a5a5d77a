package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/criclient/podcri"
)

// The kubelet's layout under a pod's directory <podDir>/<uid>.
const (
	volumesSubdir    = "volumes"
	containersSubdir = "containers"
	emptyDirPlugin   = "kubernetes.io~empty-dir"
	downwardPlugin   = "kubernetes.io~downward-api"
	projectedPlugin  = "kubernetes.io~projected"
)

// volumeError is a volume of a pod that could not be set up, or the pod's
// directory that could not be made (Volume empty). A container that
// mounts the volume fails to start with it (the other containers start);
// the pod's next sync tries again.
type volumeError struct {
	Pod    string // namespace/name
	Volume string
	Err    error
}

func (e *volumeError) Error() string {
	if e.Volume == "" {
		return fmt.Sprintf("agent: pod %s: %v", e.Pod, e.Err)
	}
	// The kubelet's FailedMount event.
	return fmt.Sprintf("agent: pod %s: MountVolume.SetUp failed for volume %q : %v", e.Pod, e.Volume, e.Err)
}

func (e *volumeError) Unwrap() error { return e.Err }

// volumeManager sets up the volumes of the agent's pods under its pod
// directory and removes them with the pods. Each pod's volumes are set
// up by the pod's worker, at each sync, before any container of it is
// created; only that pod waits for it.
type volumeManager struct {
	dir     string // "": the agent keeps no pod directories
	selinux bool
	log     *zap.Logger

	// With a PodResources (useResources): where configMaps, secrets and
	// tokens come from, the agent's context for reading them, and the
	// wake of a pod whose objects changed.
	res       PodResources
	tokens    *tokens
	ctx       context.Context
	wake      func(types.UID)
	onDiskMsg sync.Once              // the warning that secrets are not on tmpfs
	keyrings  map[types.UID]*keyring // guarded by mu: each pod's imagePullSecrets, as of its last set-up

	mu   sync.Mutex
	pods map[types.UID]*podVolumes
}

// podVolumes is what the last set-up of a pod's volumes gave.
type podVolumes struct {
	mu      sync.Mutex
	done    bool
	vols    map[string]podcri.Volume
	errs    map[string]error
	written map[string]string // written volume dir → its files as last written
}

func newVolumeManager(dir string, log *zap.Logger) *volumeManager {
	return &volumeManager{dir: dir, selinux: selinuxEnabled(), log: log, pods: map[types.UID]*podVolumes{}}
}

// selinuxEnabled checks the host as the kubelet does: selinuxfs is
// mounted.
func selinuxEnabled() bool {
	_, err := os.Stat("/sys/fs/selinux/enforce")
	return err == nil
}

func (m *volumeManager) state(uid types.UID) *podVolumes {
	m.mu.Lock()
	defer m.mu.Unlock()
	pv, ok := m.pods[uid]
	if !ok {
		pv = &podVolumes{written: map[string]string{}}
		m.pods[uid] = pv
	}
	return pv
}

func (m *volumeManager) forget(uid types.UID) {
	m.mu.Lock()
	delete(m.pods, uid)
	delete(m.keyrings, uid)
	m.mu.Unlock()
	if m.res != nil {
		m.res.UnregisterPod(uid)
		m.tokens.forget(uid)
	}
}

// useResources makes the volume manager read the pods' configMaps,
// secrets and tokens from src (nil: none), within ctx, and wake a pod
// whose objects changed.
func (m *volumeManager) useResources(ctx context.Context, src PodResources, clk clock.PassiveClock, wake func(types.UID)) {
	if src == nil {
		return
	}
	m.res, m.tokens, m.ctx, m.wake = src, newTokens(src, clk), ctx, wake
}

func (m *volumeManager) podPath(uid types.UID, elem ...string) string {
	return filepath.Join(append([]string{m.dir, string(uid)}, elem...)...)
}

// setUp sets up every volume of pod (idempotent: an existing emptyDir is
// kept, so an adopting agent loses no data; downward-API files are
// rewritten when the pod's metadata changed) and records, per volume, its
// host path or why it failed.
func (m *volumeManager) setUp(pod *corev1.Pod) {
	pv := m.state(pod.UID)
	pv.mu.Lock()
	defer pv.mu.Unlock()
	m.setUpLocked(pod, pv)
}

func (m *volumeManager) setUpLocked(pod *corev1.Pod, pv *podVolumes) {
	pv.vols, pv.errs, pv.done = map[string]podcri.Volume{}, map[string]error{}, true
	var objs *podObjects
	ctx := context.Background()
	if m.res != nil {
		m.res.RegisterPod(pod, m.wake)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(m.ctx, resourceTimeout)
		defer cancel()
		objs = newPodObjects(ctx, m.res, pod.Namespace)
		m.setKeyring(pod.UID, m.pullKeyring(pod, objs))
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		path, err := m.setUpVolume(ctx, pod, v, pv, objs)
		if err != nil {
			pv.errs[v.Name] = &volumeError{Pod: podKey(pod), Volume: v.Name, Err: err}
			continue
		}
		pv.vols[v.Name] = podcri.VolumeAt(v.VolumeSource, path)
	}
}

func (m *volumeManager) setUpVolume(ctx context.Context, pod *corev1.Pod, v *corev1.Volume, pv *podVolumes, objs *podObjects) (string, error) {
	src := v.VolumeSource
	if src.HostPath != nil {
		return src.HostPath.Path, checkHostPath(src.HostPath)
	}
	fromAPI := src.ConfigMap != nil || src.Secret != nil || (src.Projected != nil && projectsAPIObjects(src.Projected))
	switch {
	case fromAPI && m.res == nil && src.ConfigMap != nil:
		return "", errNoResources("configMap volumes")
	case fromAPI && m.res == nil && src.Secret != nil:
		return "", errNoResources("secret volumes")
	case fromAPI && m.res == nil:
		return "", projectedNeedsAPI(src.Projected)
	case src.EmptyDir == nil && src.DownwardAPI == nil && !fromAPI && src.Projected == nil:
		return "", fmt.Errorf("volume type %s is not supported", volumeKind(src))
	}
	if m.dir == "" {
		return "", errors.New("the agent keeps no pod directories (agent.Node.PodDir)")
	}
	switch {
	case src.EmptyDir != nil:
		return m.setUpEmptyDir(pod.UID, v)
	default:
		var files []podcri.File
		var err error
		if fromAPI {
			files, err = m.sourceFiles(ctx, pod, v, objs)
		} else {
			files, err = podcri.VolumeFiles(pod, v)
		}
		if err != nil {
			return "", err
		}
		plugin := downwardPlugin
		switch {
		case src.Projected != nil:
			plugin = projectedPlugin
		case src.ConfigMap != nil:
			plugin = configMapPlugin
		case src.Secret != nil:
			plugin = secretPlugin
		}
		dir := m.podPath(pod.UID, volumesSubdir, plugin, v.Name)
		if err := makeDir(dir, 0o755); err != nil {
			return "", err
		}
		if src.Secret != nil || (src.Projected != nil && fromAPI) {
			if err := m.memoryBacked(dir); err != nil {
				return "", err
			}
		}
		digest := filesDigest(files)
		if pv.written[dir] == digest {
			return dir, nil
		}
		if err := writeAtomically(dir, files); err != nil {
			return "", err
		}
		pv.written[dir] = digest
		return dir, nil
	}
}

// projectsAPIObjects reports whether a projected volume has a source
// that needs the API server (anything but downwardAPI).
func projectsAPIObjects(p *corev1.ProjectedVolumeSource) bool {
	for _, s := range p.Sources {
		if s.DownwardAPI == nil {
			return true
		}
	}
	return false
}

// projectedNeedsAPI names the first source of p that needs the API
// server.
func projectedNeedsAPI(p *corev1.ProjectedVolumeSource) error {
	for i, s := range p.Sources {
		what := ""
		switch {
		case s.DownwardAPI != nil:
			continue
		case s.ServiceAccountToken != nil:
			what = "serviceAccountToken"
		case s.ConfigMap != nil:
			what = "configMap"
		case s.Secret != nil:
			what = "secret"
		default:
			return fmt.Errorf("projected source %d is not supported", i)
		}
		return fmt.Errorf("projected source %d is %s, which needs the API server: not available to a static pod", i, what)
	}
	return nil
}

// memoryBacked puts a secret or projected volume's directory on a tmpfs,
// as the kubelet does so that secrets never reach the disk. That needs
// root: an agent that is not root writes them to the pod directory, and
// says so once in its log.
func (m *volumeManager) memoryBacked(dir string) error {
	if os.Geteuid() != 0 {
		m.onDiskMsg.Do(func() {
			m.log.Warn("not root: secret and projected volumes are written to the pod directory's disk, not to a tmpfs", zap.String("dir", m.dir))
		})
		return nil
	}
	if err := mountTmpfs(dir, nil); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// setUpEmptyDir makes the pod's directory for an emptyDir, world-writable
// as the kubelet makes it (so a non-root container can use it); medium
// Memory mounts a tmpfs there, of sizeLimit when set. A disk emptyDir's
// sizeLimit is not enforced (the kubelet evicts the pod; the agent does
// not).
func (m *volumeManager) setUpEmptyDir(uid types.UID, v *corev1.Volume) (string, error) {
	dir := m.podPath(uid, volumesSubdir, emptyDirPlugin, v.Name)
	if err := makeDir(dir, 0o777); err != nil {
		return "", err
	}
	switch ed := v.EmptyDir; ed.Medium {
	case corev1.StorageMediumDefault:
	case corev1.StorageMediumMemory:
		if err := mountTmpfs(dir, ed.SizeLimit); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("emptyDir medium %q is not supported", ed.Medium)
	}
	return dir, nil
}

// makeDir makes dir with mode (whatever the umask), its missing parents
// with 0750 (the kubelet's pod directories).
func makeDir(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return fmt.Errorf("pod directory: %w", err)
	}
	if err := os.Mkdir(dir, mode); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil
		}
		return fmt.Errorf("pod directory: %w", err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("pod directory: %w", err)
	}
	return nil
}

// checkHostPath checks a hostPath volume's path against its type as the
// kubelet does, creating it for DirectoryOrCreate (0755, with its
// parents) and FileOrCreate (0644; its parent must exist).
func checkHostPath(hp *corev1.HostPathVolumeSource) error {
	path := hp.Path
	if !filepath.IsAbs(path) {
		return fmt.Errorf("hostPath %q must be an absolute path", path)
	}
	t := corev1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	failed := func(what string) error { return fmt.Errorf("hostPath type check failed: %s is not %s", path, what) }
	fi, err := os.Stat(path)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hostPath type check failed: %w", err)
	}
	switch t {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectoryOrCreate:
		if !exists {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return fmt.Errorf("hostPath type check failed: %w", err)
			}
			return nil
		}
		fallthrough
	case corev1.HostPathDirectory:
		if !exists || !fi.IsDir() {
			return failed("a directory")
		}
	case corev1.HostPathFileOrCreate:
		if !exists {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return fmt.Errorf("hostPath type check failed: %w", err)
			}
			return f.Close()
		}
		fallthrough
	case corev1.HostPathFile:
		if !exists || !fi.Mode().IsRegular() {
			return failed("a file")
		}
	case corev1.HostPathSocket:
		if !exists || fi.Mode()&os.ModeSocket == 0 {
			return failed("a socket file")
		}
	case corev1.HostPathCharDev:
		if !exists || fi.Mode()&os.ModeCharDevice == 0 {
			return failed("a character device")
		}
	case corev1.HostPathBlockDev:
		if !exists || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
			return failed("a block device")
		}
	default:
		return fmt.Errorf("hostPath type %q is not one of the supported types", t)
	}
	return nil
}

// volumeKind names the source a volume uses, as its manifest spells it.
func volumeKind(src corev1.VolumeSource) string {
	b, _ := json.Marshal(src) // a VolumeSource always marshals
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(b, &fields)
	for k := range fields {
		return k
	}
	return "(none)"
}

// containerOptions are the podcri options that mount c's volumes, set up
// by the pod's last setUp (done now if none was), and its
// termination-message file. A mount of a volume that failed to set up
// gives that volume's *volumeError.
func (m *volumeManager) containerOptions(pod *corev1.Pod, c *corev1.Container, attempt uint32) ([]podcri.ContainerOption, error) {
	pv := m.state(pod.UID)
	pv.mu.Lock()
	if !pv.done {
		m.setUpLocked(pod, pv)
	}
	vols := pv.vols
	var err error
	for _, vm := range c.VolumeMounts {
		if e := pv.errs[vm.Name]; e != nil {
			err = e
			break
		}
	}
	pv.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for _, vm := range c.VolumeMounts {
		v, ok := vols[vm.Name]
		if !ok || vm.SubPath == "" || podcri.CheckSubPath(vm.SubPath) != nil {
			continue // podcri refuses it
		}
		if err := prepareSubPath(v.HostPath, vm.SubPath); err != nil {
			return nil, &volumeError{Pod: podKey(pod), Volume: vm.Name, Err: fmt.Errorf("subPath %q of container %q: %w", vm.SubPath, c.Name, err)}
		}
	}
	opts := []podcri.ContainerOption{podcri.WithVolumes(vols), podcri.WithSELinux(m.selinux)}
	if path, ok := m.terminationFile(pod, c, attempt); ok {
		opts = append(opts, podcri.WithTerminationMessageHostPath(path))
	}
	return opts, nil
}

// prepareSubPath makes a missing subPath directory with the volume's
// permissions, as the kubelet does, after checking that what exists of it
// does not lead outside the volume through a symlink (a container could
// have made one). The kubelet also pins the path with a bind mount
// against a later swap; the agent does not.
func prepareSubPath(volume, sub string) error {
	root, err := filepath.EvalSymlinks(volume)
	if err != nil {
		return err
	}
	inside := func(p string) error {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		if real != root && !strings.HasPrefix(real, root+string(filepath.Separator)) {
			return fmt.Errorf("it resolves to %s, outside the volume", real)
		}
		return nil
	}
	full := filepath.Join(volume, sub)
	existing := full
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		existing = filepath.Dir(existing)
	}
	if err := inside(existing); err != nil {
		return err
	}
	if existing == full {
		return nil
	}
	fi, err := os.Stat(root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(full, fi.Mode().Perm()); err != nil {
		return err
	}
	if err := inside(full); err != nil {
		return err
	}
	for p := full; p != existing; p = filepath.Dir(p) { // the umask aside
		if err := os.Chmod(p, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// terminationFile makes the file the container's terminationMessagePath
// is mounted from, <pod>/containers/<name>/<attempt>, empty and
// world-writable as the kubelet makes it. Like the kubelet, it logs a
// failure and mounts nothing.
func (m *volumeManager) terminationFile(pod *corev1.Pod, c *corev1.Container, attempt uint32) (string, bool) {
	if m.dir == "" {
		return "", false
	}
	dir := m.podPath(pod.UID, containersSubdir, c.Name)
	path := filepath.Join(dir, strconv.FormatUint(uint64(attempt), 10))
	err := os.MkdirAll(dir, 0o750)
	if err == nil {
		var f *os.File
		if f, err = os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666); err == nil {
			err = errors.Join(f.Close(), os.Chmod(path, 0o666))
		}
	}
	if err != nil {
		m.log.Warn("termination-message file", zap.String("pod", podKey(pod)), zap.String("container", c.Name), zap.Error(err))
		return "", false
	}
	return path, true
}

// tearDown removes the pod's directory and what it holds (unmounting its
// tmpfs volumes first) and forgets the pod. Call it once the pod's
// sandboxes are gone.
func (m *volumeManager) tearDown(uid types.UID) error {
	m.forget(uid)
	if m.dir == "" {
		return nil
	}
	if err := removePodDir(m.podPath(uid)); err != nil {
		return fmt.Errorf("agent: remove pod directory: %w", err)
	}
	return nil
}

// podDirs lists the pods that have a directory under the pod directory.
func (m *volumeManager) podDirs() ([]types.UID, error) {
	if m.dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(m.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent: pod directories: %w", err)
	}
	var out []types.UID
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, types.UID(e.Name()))
		}
	}
	return out, nil
}

// removePodDir unmounts the volumes of the pod directory dir that are
// mount points (tmpfs emptyDirs) and removes it, refusing to when a mount
// is left under it, so that no removal reaches into another filesystem.
func removePodDir(dir string) error {
	plugins, err := os.ReadDir(filepath.Join(dir, volumesSubdir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, p := range plugins {
		vols, err := os.ReadDir(filepath.Join(dir, volumesSubdir, p.Name()))
		if err != nil {
			continue
		}
		for _, v := range vols {
			path := filepath.Join(dir, volumesSubdir, p.Name(), v.Name())
			if mounted, err := isMountPoint(path); err == nil && mounted {
				if err := unmount(path); err != nil {
					return err
				}
			}
		}
	}
	if err := checkNoMounts(dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
