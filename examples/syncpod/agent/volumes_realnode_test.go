package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/internal/testnode"
)

// On real containerd: two containers share an emptyDir (one writes a
// file, the other waits for it and checks it, exiting 0), a hostPath
// carries a file in from the host and one out, a downwardAPI file holds
// the pod's name; the pod's deletion removes its emptyDir from disk and
// leaves the hostPath's files.
func TestRealNodeVolumes(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "syncpod/app", testnode.WithSize(2<<20))
	podDir := t.TempDir()
	host := filepath.Join(t.TempDir(), "host")
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "in"), []byte("from-host"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startRealAgent(t, n, nil, agent.WithPodDir(podDir))
	workload := func(name string, mounts []corev1.VolumeMount, args ...string) corev1.Container {
		return corev1.Container{Name: name, Image: img, Command: []string{"/workload"}, Args: args, VolumeMounts: mounts}
	}
	shared := corev1.VolumeMount{Name: "shared", MountPath: "/shared"}
	dirType := corev1.HostPathDirectory
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "volumes", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Volumes: []corev1.Volume{
				{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host, Type: &dirType}}},
				{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
			},
			Containers: []corev1.Container{
				workload("writer", []corev1.VolumeMount{shared, {Name: "host", MountPath: "/host"}},
					"expect-file", "/host/in", "from-host", "write", "/host/out", "from-container", "write", "/shared/msg", "hello", "pause"),
				workload("reader", []corev1.VolumeMount{shared, {Name: "info", MountPath: "/etc/podinfo"}},
					"wait-file", "/shared/msg", "expect-file", "/shared/msg", "hello", "expect-file", "/etc/podinfo/name", "volumes", "exit", "0"),
			},
		},
	}
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
	ctx := context.Background()
	exited := func(name string) *runtimeapi.ContainerStatus {
		resp, err := n.RuntimeService().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{podcri.LabelPodName: "volumes", podcri.LabelContainerName: name}}})
		if err != nil || len(resp.Containers) == 0 || resp.Containers[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
			return nil
		}
		st, err := n.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: resp.Containers[0].Id})
		if err != nil {
			return nil
		}
		return st.Status
	}
	var reader *runtimeapi.ContainerStatus
	waitFor(t, "the reader to exit", func() bool { reader = exited("reader"); return reader != nil })
	if reader.ExitCode != 0 {
		t.Errorf("reader exited %d (%s), want 0: it did not see the writer's file or the pod's name", reader.ExitCode, reader.Message)
	}
	if w := exited("writer"); w != nil {
		t.Errorf("writer exited %d, want it running: it did not see the host's file", w.ExitCode)
	}
	if b, err := os.ReadFile(filepath.Join(host, "out")); err != nil || string(b) != "from-container" {
		t.Errorf("host file written by the container: %q, %v", b, err)
	}
	emptyDir := filepath.Join(podDir, string(agent.StaticPodUID(pod)), "volumes", "kubernetes.io~empty-dir", "shared")
	if b, err := os.ReadFile(filepath.Join(emptyDir, "msg")); err != nil || string(b) != "hello" {
		t.Errorf("the emptyDir on the host holds %q, %v", b, err)
	}

	a.Apply(agent.PodUpdate{Op: agent.OpDelete, Pod: pod})
	waitFor(t, "the pod gone from containerd", func() bool {
		sbs, err := n.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		return err == nil && len(sbs.GetItems()) == 0 && a.Snapshot().Total == 0
	})
	if !gone(filepath.Join(podDir, string(agent.StaticPodUID(pod)))) {
		t.Error("the pod's directory (and its emptyDir) is still on disk after the deletion")
	}
	if _, err := os.Stat(filepath.Join(host, "out")); err != nil {
		t.Errorf("the hostPath's file went with the pod: %v", err)
	}
}

// On real containerd, a hostPath of the wrong type keeps its container
// from being created while the pod's other container runs.
func TestRealNodeHostPathWrongType(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "syncpod/app", testnode.WithSize(2<<20))
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a := startRealAgent(t, n, nil, agent.WithPodDir(t.TempDir()))
	dirType := corev1.HostPathDirectory
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "wrongtype", Namespace: "default"},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: file, Type: &dirType}}}},
			Containers: []corev1.Container{
				{Name: "needs", Image: img, VolumeMounts: []corev1.VolumeMount{{Name: "dir", MountPath: "/dir"}}},
				{Name: "free", Image: img},
			},
		},
	}
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pod})
	waitFor(t, "the mount failure reported", func() bool {
		return podState(a, "wrongtype").Message != "" && len(mustList(t, n, "wrongtype", "free")) == 1
	})
	if got := podState(a, "wrongtype").Message; !strings.Contains(got, "hostPath type check failed: "+file+" is not a directory") {
		t.Errorf("message %q", got)
	}
	if cs := mustList(t, n, "wrongtype", "needs"); len(cs) != 0 {
		t.Errorf("the container with the bad hostPath exists: %v", cs)
	}
}

func mustList(t *testing.T, n *testnode.Node, pod, container string) []*runtimeapi.Container {
	t.Helper()
	resp, err := n.RuntimeService().ListContainers(context.Background(), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{podcri.LabelPodName: pod, podcri.LabelContainerName: container}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Containers
}
