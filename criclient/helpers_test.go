package criclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const testImage = "busybox:1.36"

// startSim serves a crisim runtime (with testImage present) for one test.
func startSim(t testing.TB, opts ...crisim.Option) *crisim.Server {
	t.Helper()
	srv, err := crisim.Start(append([]crisim.Option{crisim.WithImage(testImage, 1<<20)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// dial connects a Client to srv and closes it when the test ends.
func dial(t testing.TB, srv *crisim.Server, opts ...criclient.Option) *criclient.Client {
	t.Helper()
	c, err := criclient.Dial(context.Background(), srv.Endpoint(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func sandboxConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Uid: name + "-uid", Namespace: "default"},
		Labels:   map[string]string{"io.kubernetes.pod.name": name},
	}
}

func containerConfig(name string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: testImage},
		Labels:   map[string]string{"app": name},
	}
}

// eventually polls cond until it holds; it fails the test after a long
// safety limit (a hang, not a timing assertion).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
