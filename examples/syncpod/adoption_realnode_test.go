package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
	"github.com/syncpod/syncpod/internal/testnode"
)

// runtimeState is every sandbox and container on the node: "kind id pod
// state" lines, sorted.
func runtimeState(t *testing.T, n *testnode.Node) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sbs, err := n.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := n.RuntimeService().ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range sbs.Items {
		out = append(out, fmt.Sprintf("sandbox %s %s %s", s.Id, s.Metadata.Name, s.State))
	}
	for _, c := range cs.Containers {
		out = append(out, fmt.Sprintf("container %s %s/%s %s", c.Id, c.Labels[podcri.LabelPodName], c.Metadata.Name, c.State))
	}
	slices.Sort(out)
	return out
}

func only(lines []string, pod string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, " "+pod+" ") || strings.Contains(l, " "+pod+"/") {
			out = append(out, l)
		}
	}
	return out
}

// The command is SIGKILLed with pods running on real containerd and
// started again: the pods whose manifests remain are adopted with every
// sandbox and container ID unchanged and no restart, and the pod whose
// manifest was deleted while the agent was down is removed.
func TestRealNodeAdoptionAfterKill(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "syncpod/app", testnode.WithSize(2<<20))
	dir := t.TempDir()
	manifest := func(name string) string {
		return fmt.Sprintf(`metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - {name: proxy, image: %q, command: [/workload], args: [pause], restartPolicy: Always}
  containers:
  - {name: app, image: %q, command: [/workload], args: [pause]}
  - {name: worker, image: %q, command: [/workload], args: [pause]}
`, name, img, img, img)
	}
	for _, name := range []string{"kept", "gone"} {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(manifest(name)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	podDir := t.TempDir()
	agentCmd := func(args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
		cmd := exec.Command(bin, append([]string{"--manifests", dir, "--runtime-endpoint", n.Endpoint, "--log-level", "info", "--pod-dir", podDir}, args...)...)
		var out, logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &logs
		cmd.Env = append(os.Environ(), envRunMain+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd, &out, &logs
	}

	first, _, firstLogs := agentCmd()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	running := func() bool {
		st := runtimeState(t, n)
		return len(st) == 8 && !slices.ContainsFunc(st, func(l string) bool {
			return !strings.HasSuffix(l, "SANDBOX_READY") && !strings.HasSuffix(l, "CONTAINER_RUNNING")
		})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !running() {
		if time.Now().After(deadline) {
			_ = first.Process.Kill()
			_ = first.Wait()
			t.Fatalf("pods not running: %v\nagent logs:\n%s", runtimeState(t, n), firstLogs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := runtimeState(t, n)
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if err := os.Remove(filepath.Join(dir, "gone.yaml")); err != nil {
		t.Fatal(err)
	}

	second, secondOut, secondLogs := agentCmd("--json", "--exit-when-running")
	if err := second.Run(); err != nil {
		t.Fatalf("second agent: %v\n%s\n%s", err, secondOut, secondLogs)
	}
	after := runtimeState(t, n)
	if got, want := only(after, "kept"), only(before, "kept"); !slices.Equal(got, want) {
		t.Fatalf("kept pod changed by the adoption:\nbefore %v\nafter  %v", want, got)
	}
	if got := only(after, "gone"); len(got) != 0 {
		t.Fatalf("the pod whose manifest was deleted is still there: %v\nagent logs:\n%s", got, secondLogs)
	}
	var sum summary
	if err := json.Unmarshal(secondOut.Bytes(), &sum); err != nil {
		t.Fatalf("summary: %v\n%s", err, secondOut)
	}
	if len(sum.Pods) != 1 || sum.Pods[0].Name != "kept" || sum.Pods[0].State != "Running" || sum.Pods[0].Restarts != 0 || !sum.Pods[0].Adopted {
		t.Fatalf("summary after adoption: %+v, want kept Running, adopted, with no restart", sum.Pods)
	}
	t.Logf("adopted %d sandboxes and containers unchanged; removed the deleted manifest's pod", len(only(after, "kept")))
}
