package podcri

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestContainerConfig(t *testing.T) {
	grace := int64(30)
	cases := []struct {
		name  string
		mod   func(*corev1.Pod)
		opts  []ContainerOption
		check func(*testing.T, *runtimeapi.ContainerConfig)
	}{
		{name: "metadata attempt is the restart count", opts: []ContainerOption{WithRestartCount(3)},
			check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
				if c.Metadata.Name != "app" || c.Metadata.Attempt != 3 || c.Annotations[AnnotationContainerRestartCount] != "3" {
					t.Errorf("metadata %v annotations %v", c.Metadata, c.Annotations)
				}
			}},
		{name: "image: user-specified image and resolved ref", opts: []ContainerOption{WithImageRef("sha256:abc")},
			check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
				if c.Image.UserSpecifiedImage != "nginx" || c.Image.Image != "sha256:abc" {
					t.Errorf("image %v", c.Image)
				}
			}},
		{name: "image without a ref is the image as written", check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
			if c.Image.Image != "nginx" {
				t.Errorf("image %v", c.Image)
			}
		}},
		{name: "command, args and working dir exactly as given", mod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Args = []string{"-g", "daemon off;"}
			p.Spec.Containers[0].WorkingDir = "/srv"
		}, check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
			if len(c.Command) != 0 || len(c.Args) != 2 || c.WorkingDir != "/srv" {
				t.Errorf("command %v args %v dir %q", c.Command, c.Args, c.WorkingDir)
			}
		}},
		{name: "kubelet container labels", check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
			want := map[string]string{LabelPodName: "web", LabelPodNamespace: "default", LabelPodUID: "u1", LabelContainerName: "app"}
			if len(c.Labels) != len(want) {
				t.Errorf("labels %v", c.Labels)
			}
			for k, v := range want {
				if c.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
				}
			}
		}},
		{name: "kubelet container annotations: hash, termination message, grace period, ports", mod: func(p *corev1.Pod) {
			p.Spec.TerminationGracePeriodSeconds = &grace
			p.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
			p.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageReadFile
		}, check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
			a := c.Annotations
			if a[AnnotationContainerHash] == "" || a[AnnotationContainerTerminationMessagePath] != "/dev/termination-log" ||
				a[AnnotationContainerTerminationMessagePolicy] != "File" || a[AnnotationPodTerminationGracePeriod] != "30" ||
				a[AnnotationContainerPorts] != `[{"hostPort":8080,"containerPort":80,"protocol":"TCP"},{"containerPort":53,"protocol":"UDP"}]` {
				t.Errorf("annotations %v", a)
			}
		}},
		{name: "log path is <name>/<restart count>.log", opts: []ContainerOption{WithRestartCount(1)},
			check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
				if c.LogPath != "app/1.log" {
					t.Errorf("log path %q", c.LogPath)
				}
			}},
		{name: "stdin, stdinOnce and tty are the container's", mod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Stdin, p.Spec.Containers[0].StdinOnce, p.Spec.Containers[0].TTY = true, true, true
		}, check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
			if !c.Stdin || !c.StdinOnce || !c.Tty {
				t.Errorf("stdin %v once %v tty %v", c.Stdin, c.StdinOnce, c.Tty)
			}
		}},
		{name: "mounts as given, then the termination-message file at its default path",
			opts: []ContainerOption{WithMounts(&runtimeapi.Mount{HostPath: "/data", ContainerPath: "/data"}), WithTerminationMessageHostPath("/var/lib/x/termination-log"), nil},
			check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
				if len(c.Mounts) != 2 || c.Mounts[0].ContainerPath != "/data" ||
					c.Mounts[1].HostPath != "/var/lib/x/termination-log" || c.Mounts[1].ContainerPath != "/dev/termination-log" {
					t.Errorf("mounts %v", c.Mounts)
				}
			}},
		{name: "namespace options follow the pod unless given", mod: func(p *corev1.Pod) { p.Spec.HostPID = true },
			check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
				if ns := c.Linux.SecurityContext.NamespaceOptions; ns.Pid != runtimeapi.NamespaceMode_NODE {
					t.Errorf("ns %v", ns)
				}
			}},
		{name: "namespace options as given", opts: []ContainerOption{WithNamespaceOptions(&runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE})},
			check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
				if ns := c.Linux.SecurityContext.NamespaceOptions; ns.Network != runtimeapi.NamespaceMode_NODE {
					t.Errorf("ns %v", ns)
				}
			}},
		{name: "resources use the node memory capacity option", mod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = rl("memory", "1Gi")
		}, opts: []ContainerOption{WithNodeMemoryCapacity(2 << 30)}, check: func(t *testing.T, c *runtimeapi.ContainerConfig) {
			if c.Linux.Resources.OomScoreAdj != 500 {
				t.Errorf("oom %d", c.Linux.Resources.OomScoreAdj)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			if tc.mod != nil {
				tc.mod(pod)
			}
			cfg, err := ContainerConfig(pod, &pod.Spec.Containers[0], tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg)
		})
	}
}

func TestContainerConfigInitContainer(t *testing.T) {
	pod := testPod()
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	cfg, err := ContainerConfig(pod, &corev1.Container{Name: "init", Image: "busybox"})
	if err != nil || cfg.Metadata.Name != "init" {
		t.Fatalf("cfg %v err %v", cfg, err)
	}
}

func TestContainerHash(t *testing.T) {
	a := &corev1.Container{Name: "app", Image: "nginx:1"}
	b := &corev1.Container{Name: "app", Image: "nginx:2"}
	if ContainerHash(a) != ContainerHash(a.DeepCopy()) {
		t.Error("equal specs hash apart")
	}
	if ContainerHash(a) == ContainerHash(b) {
		t.Error("an image change keeps the hash")
	}
	if len(ContainerHash(a)) != 16 {
		t.Errorf("hash %q is not 16 hex digits", ContainerHash(a))
	}
}
