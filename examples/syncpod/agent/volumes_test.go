package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

const volImage = "registry.sim/app:1"

// configs records the config of every container the agent creates, by
// "pod/container" (the last one).
type configs struct {
	cri.RuntimeService
	mu  sync.Mutex
	got map[string]*runtimeapi.ContainerConfig
}

func (r *configs) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	id, err := r.RuntimeService.CreateContainer(ctx, sb, cfg, sbCfg)
	if err == nil {
		r.mu.Lock()
		r.got[sbCfg.GetMetadata().GetName()+"/"+cfg.GetMetadata().GetName()] = cfg
		r.mu.Unlock()
	}
	return id, err
}

func (r *configs) get(key string) *runtimeapi.ContainerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[key]
}

// startVolumeAgent starts an agent on a simulated runtime that records
// the container configs, with its pods under podDir.
func startVolumeAgent(t *testing.T, n *simNode, podDir string, opts ...agent.Option) (*agent.Agent, *configs) {
	t.Helper()
	rec := &configs{RuntimeService: n.client.CRI(), got: map[string]*runtimeapi.ContainerConfig{}}
	a, err := agent.New(rec, n.client.CRI(), append([]agent.Option{agent.WithPodDir(podDir), agent.WithTimeScale(testScale)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	return a, rec
}

func volumePod(name string, volumes []corev1.Volume, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{Volumes: volumes, Containers: containers},
	}
}

func mounting(name string, mounts ...corev1.VolumeMount) corev1.Container {
	return corev1.Container{Name: name, Image: volImage, VolumeMounts: mounts}
}

func hostPathType(t corev1.HostPathType) *corev1.HostPathType { return &t }

func mountAt(cfg *runtimeapi.ContainerConfig, containerPath string) *runtimeapi.Mount {
	for _, m := range cfg.GetMounts() {
		if m.ContainerPath == containerPath {
			return m
		}
	}
	return nil
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func gone(path string) bool {
	_, err := os.Lstat(path)
	return errors.Is(err, os.ErrNotExist)
}

// Each volume kind lands in the containers' CRI configs: one emptyDir
// directory shared by both containers, a hostPath created for
// DirectoryOrCreate, downwardAPI and projected volumes whose files hold
// the kubelet's formats (read-only mounts), a subPath made inside its
// volume, and each container's termination-message file. A label change
// rewrites the downward-API file; the pod's deletion removes its
// directory, emptyDir and all, and leaves the hostPath alone.
func TestVolumesMountedAndRemovedWithThePod(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			n := startSim(t, crisim.WithImage(volImage, 1))
			podDir := t.TempDir()
			host := filepath.Join(t.TempDir(), "made", "here")
			a, rec := startVolumeAgent(t, n, podDir, agent.WithMode(mode))
			labels := corev1.DownwardAPIVolumeFile{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}
			name := corev1.DownwardAPIVolumeFile{Path: "meta/name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}
			pod := volumePod("vols", []corev1.Volume{
				{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host, Type: hostPathType(corev1.HostPathDirectoryOrCreate)}}},
				{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{labels, name}}}},
				{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{name}}}}}}},
			},
				mounting("writer", corev1.VolumeMount{Name: "shared", MountPath: "/out"}, corev1.VolumeMount{Name: "host", MountPath: "/host", ReadOnly: true},
					corev1.VolumeMount{Name: "info", MountPath: "/etc/podinfo"}),
				mounting("reader", corev1.VolumeMount{Name: "shared", MountPath: "/in"}, corev1.VolumeMount{Name: "shared", MountPath: "/logs", SubPath: "logs/reader"},
					corev1.VolumeMount{Name: "proj", MountPath: "/etc/proj"}),
			)
			a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
			waitFor(t, "the pod running", allRunning(a, 1))

			uid := string(agent.StaticPodUID(pod))
			vols := filepath.Join(podDir, uid, "volumes")
			shared := filepath.Join(vols, "kubernetes.io~empty-dir", "shared")
			w, r := rec.get("vols/writer"), rec.get("vols/reader")
			for _, c := range []struct {
				cfg            *runtimeapi.ContainerConfig
				path, hostPath string
				readOnly       bool
			}{
				{w, "/out", shared, false},
				{w, "/host", host, true},
				{w, "/etc/podinfo", filepath.Join(vols, "kubernetes.io~downward-api", "info"), true},
				{r, "/in", shared, false},
				{r, "/logs", filepath.Join(shared, "logs", "reader"), false},
				{r, "/etc/proj", filepath.Join(vols, "kubernetes.io~projected", "proj"), true},
				{w, "/dev/termination-log", filepath.Join(podDir, uid, "containers", "writer", "0"), false},
				{r, "/dev/termination-log", filepath.Join(podDir, uid, "containers", "reader", "0"), false},
			} {
				m := mountAt(c.cfg, c.path)
				if m == nil || m.HostPath != c.hostPath || m.Readonly != c.readOnly || m.Propagation != runtimeapi.MountPropagation_PROPAGATION_PRIVATE {
					t.Errorf("%s: mount %v, want %s (read-only %v)", c.path, m, c.hostPath, c.readOnly)
				}
			}
			for path, mode := range map[string]os.FileMode{shared: 0o777, host: 0o755, filepath.Join(shared, "logs", "reader"): 0o777} {
				if fi, err := os.Stat(path); err != nil || !fi.IsDir() || fi.Mode().Perm() != mode {
					t.Errorf("%s: %v %v, want a directory with mode %o", path, fi, err, mode)
				}
			}
			if fi, err := os.Stat(filepath.Join(podDir, uid, "containers", "writer", "0")); err != nil || fi.Mode().Perm() != 0o666 {
				t.Errorf("termination-message file: %v %v, want mode 0666", fi, err)
			}
			info := filepath.Join(vols, "kubernetes.io~downward-api", "info")
			if got := readFile(t, filepath.Join(info, "labels")); got != `app="vols"` {
				t.Errorf("labels file %q", got)
			}
			if got := readFile(t, filepath.Join(info, "meta", "name")); got != "vols" {
				t.Errorf("name file %q", got)
			}
			if target, err := os.Readlink(filepath.Join(info, "labels")); err != nil || target != filepath.Join("..data", "labels") {
				t.Errorf("labels is %q (%v), want a symlink through ..data", target, err)
			}
			if got := readFile(t, filepath.Join(vols, "kubernetes.io~projected", "proj", "meta", "name")); got != "vols" {
				t.Errorf("projected name file %q", got)
			}

			// A label change reaches the file on a later sync, in one swap.
			updated := pod.DeepCopy()
			updated.Labels["tier"] = "front"
			a.Apply(agent.PodUpdate{Op: agent.OpUpdate, Pod: updated})
			waitFor(t, "the labels file updated", func() bool {
				b, _ := os.ReadFile(filepath.Join(info, "labels"))
				return string(b) == `app="vols"`+"\n"+`tier="front"`
			})
			waitFor(t, "the old version removed", func() bool {
				versions, _ := filepath.Glob(filepath.Join(info, "..version.*"))
				return len(versions) == 1
			})

			a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: updated})
			waitFor(t, "the pod gone", func() bool { return a.Snapshot().Total == 0 })
			if !gone(filepath.Join(podDir, uid)) {
				t.Errorf("pod directory left after the pod's deletion")
			}
			if fi, err := os.Stat(host); err != nil || !fi.IsDir() {
				t.Errorf("the hostPath went with the pod: %v", err)
			}
		})
	}
}

// A hostPath of the wrong type fails the start of the container that
// mounts it, with the kubelet's FailedMount message, as a *VolumeError; the
// pod's other container starts, other pods are not held up, and once the
// path is right a later sync starts it.
func TestHostPathOfTheWrongType(t *testing.T) {
	n := startSim(t, crisim.WithImage(volImage, 1))
	var mu sync.Mutex
	var startErrs []error
	a, rec := startVolumeAgent(t, n, t.TempDir(), agent.WithEventHook(func(e agent.Event) {
		if e.Type == agent.EventStartError {
			mu.Lock()
			startErrs = append(startErrs, e.Err)
			mu.Unlock()
		}
	}))
	path := filepath.Join(t.TempDir(), "conf")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := volumePod("wrong", []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: path, Type: hostPathType(corev1.HostPathDirectory)}}}},
		mounting("needs", corev1.VolumeMount{Name: "conf", MountPath: "/conf"}), mounting("free"))
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: volumePod("other", nil, mounting("app"))})
	want := `MountVolume.SetUp failed for volume "conf" : hostPath type check failed: ` + path + ` is not a directory`
	waitFor(t, "the start error", func() bool { return strings.Contains(podState(a, "wrong").Message, want) })
	waitFor(t, "the other pod running", func() bool { return podState(a, "other").State == agent.PodRunning })
	waitFor(t, "the free container created", func() bool { return rec.get("wrong/free") != nil })
	if rec.get("wrong/needs") != nil {
		t.Fatal("the container with the bad hostPath was created")
	}
	mu.Lock()
	var ve *agent.VolumeError
	if len(startErrs) == 0 || !errors.As(startErrs[0], &ve) || ve.Volume != "conf" || ve.Pod != "default/wrong" {
		t.Errorf("start errors %v, want a *VolumeError for volume conf", startErrs)
	}
	mu.Unlock()

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod running once the path is a directory", func() bool { return podState(a, "wrong").State == agent.PodRunning })
}

// The hostPath types, checked as the kubelet checks them.
func TestHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	if err := syscall.Mknod(sock, syscall.S_IFSOCK|0o600, 0); err != nil {
		t.Skipf("mknod socket: %v", err)
	}
	for _, tc := range []struct {
		name   string // the kubelet behaviour the case follows
		path   string
		typ    corev1.HostPathType
		errHas string
		check  func(t *testing.T)
	}{
		{name: "no type: no check, even for a missing path", path: filepath.Join(dir, "missing"), typ: corev1.HostPathUnset},
		{name: "DirectoryOrCreate makes the directory 0755 with its parents", path: filepath.Join(dir, "a", "b"), typ: corev1.HostPathDirectoryOrCreate,
			check: func(t *testing.T) {
				if fi, err := os.Stat(filepath.Join(dir, "a", "b")); err != nil || fi.Mode().Perm() != 0o755 {
					t.Errorf("made %v %v", fi, err)
				}
			}},
		{name: "DirectoryOrCreate on a file fails", path: file, typ: corev1.HostPathDirectoryOrCreate, errHas: "is not a directory"},
		{name: "Directory must exist", path: filepath.Join(dir, "nodir"), typ: corev1.HostPathDirectory, errHas: "is not a directory"},
		{name: "Directory is a directory", path: dir, typ: corev1.HostPathDirectory},
		{name: "FileOrCreate makes an empty 0644 file", path: filepath.Join(dir, "new"), typ: corev1.HostPathFileOrCreate,
			check: func(t *testing.T) {
				if fi, err := os.Stat(filepath.Join(dir, "new")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
					t.Errorf("made %v %v", fi, err)
				}
			}},
		{name: "FileOrCreate does not make the parent directory", path: filepath.Join(dir, "noparent", "f"), typ: corev1.HostPathFileOrCreate, errHas: "no such file or directory"},
		{name: "FileOrCreate on a directory fails", path: dir, typ: corev1.HostPathFileOrCreate, errHas: "is not a file"},
		{name: "File is a file", path: file, typ: corev1.HostPathFile},
		{name: "File on a directory fails", path: dir, typ: corev1.HostPathFile, errHas: "is not a file"},
		{name: "Socket is a socket", path: sock, typ: corev1.HostPathSocket},
		{name: "Socket on a file fails", path: file, typ: corev1.HostPathSocket, errHas: "is not a socket file"},
		{name: "CharDevice is a character device", path: "/dev/null", typ: corev1.HostPathCharDev},
		{name: "CharDevice on a file fails", path: file, typ: corev1.HostPathCharDev, errHas: "is not a character device"},
		{name: "BlockDevice on a character device fails", path: "/dev/null", typ: corev1.HostPathBlockDev, errHas: "is not a block device"},
		{name: "an unknown type fails", path: file, typ: "Fifo", errHas: "not one of the supported types"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := agent.CheckHostPath(&corev1.HostPathVolumeSource{Path: tc.path, Type: &tc.typ})
			if tc.errHas == "" && err != nil {
				t.Fatal(err)
			}
			if tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)) {
				t.Fatalf("err %v, want one containing %q", err, tc.errHas)
			}
			if tc.check != nil {
				tc.check(t)
			}
		})
	}
}

// Volumes the agent cannot give a static pod fail its containers' starts
// with a message that says why: configMap and secret need the API server,
// a projected service-account token too, other kinds are not supported,
// and emptyDirs need WithPodDir.
func TestUnavailableVolumes(t *testing.T) {
	n := startSim(t, crisim.WithImage(volImage, 1))
	a, _ := startVolumeAgent(t, n, t.TempDir())
	noDir, _ := startVolumeAgent(t, n, "")
	for _, tc := range []struct {
		a    *agent.Agent
		src  corev1.VolumeSource
		want string
	}{
		{a, corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}, "configMap volumes need the API server: not available to a static pod"},
		{a, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}, "secret volumes need the API server"},
		{a, corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}, "serviceAccountToken, which needs the API server"},
		{a, corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}, "volume type persistentVolumeClaim is not supported"},
		{noDir, corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, "agent.Node.PodDir"},
	} {
		name := strings.ReplaceAll(strings.Fields(tc.want)[0], ".", "-")
		tc.a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: volumePod(name, []corev1.Volume{{Name: "v", VolumeSource: tc.src}},
			mounting("app", corev1.VolumeMount{Name: "v", MountPath: "/v"}))})
		waitFor(t, tc.want, func() bool { return strings.Contains(podState(tc.a, name).Message, tc.want) })
	}
}

// A pod directory that cannot be made fails the start with an error that
// says where.
func TestPodDirCannotBeMade(t *testing.T) {
	n := startSim(t, crisim.WithImage(volImage, 1))
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a, _ := startVolumeAgent(t, n, filepath.Join(file, "pods"))
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: volumePod("nodir", []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		mounting("app", corev1.VolumeMount{Name: "v", MountPath: "/v"}))})
	waitFor(t, "the error naming the path", func() bool {
		m := podState(a, "nodir").Message
		return strings.Contains(m, "pod directory: mkdir "+file) && strings.Contains(m, "not a directory")
	})
}

func TestWithPodDirMustBeAbsolute(t *testing.T) {
	n := startSim(t)
	if _, err := agent.New(n.client.CRI(), n.client.CRI(), agent.WithPodDir("pods")); err == nil || !strings.Contains(err.Error(), "WithNode: PodDir") {
		t.Fatalf("New with a relative pod dir: %v", err)
	}
}

// An agent that restarts adopts its pods with their emptyDir data; then
// RemoveOrphans removes the directories of the pods no longer asked for
// (with their sandboxes, or without any), and Cleanup removes the rest.
func TestPodDirsOutliveRestartsNotPods(t *testing.T) {
	n := startSim(t, crisim.WithImage(volImage, 1))
	podDir := t.TempDir()
	a, _ := startVolumeAgent(t, n, podDir)
	cache := []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	keep := volumePod("keep", cache, mounting("app", corev1.VolumeMount{Name: "cache", MountPath: "/c"}))
	drop := volumePod("drop", cache, mounting("app", corev1.VolumeMount{Name: "cache", MountPath: "/c"}))
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: keep})
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: drop})
	waitFor(t, "both pods running", allRunning(a, 2))
	keepDir := filepath.Join(podDir, string(agent.StaticPodUID(keep)))
	dropDir := filepath.Join(podDir, string(agent.StaticPodUID(drop)))
	data := filepath.Join(keepDir, "volumes", "kubernetes.io~empty-dir", "cache", "data")
	if err := os.WriteFile(data, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(podDir, "no-such-pod")
	if err := os.MkdirAll(filepath.Join(stray, "volumes"), 0o750); err != nil {
		t.Fatal(err)
	}
	a.Stop() // killed, in effect: the pods stay

	b, _ := startVolumeAgent(t, n, podDir)
	b.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: keep})
	waitFor(t, "the kept pod adopted", allRunning(b, 1))
	removed, err := b.RemoveOrphans(context.Background())
	if err != nil || len(removed) != 1 || removed[0] != "default/drop" {
		t.Fatalf("RemoveOrphans = %v, %v", removed, err)
	}
	if got := readFile(t, data); got != "kept" {
		t.Errorf("emptyDir data after adoption %q", got)
	}
	if !gone(dropDir) || !gone(stray) {
		t.Errorf("orphaned pod directories left: drop %v, stray %v", !gone(dropDir), !gone(stray))
	}
	b.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(podDir); err != nil || len(entries) != 0 {
		t.Errorf("pod directories after Cleanup: %v %v", entries, err)
	}
}

// As root, a medium Memory emptyDir is a tmpfs of its sizeLimit, unmounted
// before the pod's directory goes.
func TestMemoryEmptyDirIsATmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	n := startSim(t, crisim.WithImage(volImage, 1))
	podDir := t.TempDir()
	a, _ := startVolumeAgent(t, n, podDir)
	limit := resource.MustParse("1Mi")
	pod := volumePod("mem", []corev1.Volume{{Name: "m", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: &limit}}}}, mounting("app", corev1.VolumeMount{Name: "m", MountPath: "/m"}))
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
	waitFor(t, "the pod running", allRunning(a, 1))
	dir := filepath.Join(podDir, string(agent.StaticPodUID(pod)), "volumes", "kubernetes.io~empty-dir", "m")
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	const tmpfsMagic = 0x01021994
	if st.Type != tmpfsMagic || uint64(st.Blocks)*uint64(st.Bsize) != 1<<20 {
		t.Errorf("filesystem type %#x of %d bytes, want a 1 MiB tmpfs", st.Type, uint64(st.Blocks)*uint64(st.Bsize))
	}
	a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: pod})
	waitFor(t, "the pod gone", func() bool { return a.Snapshot().Total == 0 })
	if !gone(filepath.Dir(filepath.Dir(filepath.Dir(dir)))) {
		t.Error("pod directory left")
	}
}

// A subPath that leads out of its volume through a symlink (one a
// container could have made in an emptyDir) is refused; the container is
// not created.
func TestSubPathSymlinkOutOfTheVolume(t *testing.T) {
	n := startSim(t, crisim.WithImage(volImage, 1))
	podDir := t.TempDir()
	a, rec := startVolumeAgent(t, n, podDir)
	pod := volumePod("escape", []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		mounting("app", corev1.VolumeMount{Name: "v", MountPath: "/v", SubPath: "esc/inner"}))
	dir := filepath.Join(podDir, string(agent.StaticPodUID(pod)), "volumes", "kubernetes.io~empty-dir", "v")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "esc")); err != nil {
		t.Fatal(err)
	}
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
	waitFor(t, "the refusal", func() bool { return strings.Contains(podState(a, "escape").Message, "outside the volume") })
	if rec.get("escape/app") != nil || !gone(filepath.Join(outside, "inner")) {
		t.Error("the container was created, or the subPath made outside the volume")
	}
}
