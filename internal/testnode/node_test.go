package testnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// runPod pulls image, starts a sandbox and one container running args,
// returning the sandbox and container IDs.
func runPod(t *testing.T, n *Node, name, image string, args ...string) (string, string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	return runPodTB(t, n, name, image, args...)
}

func runPodTB(t testing.TB, n *Node, name, image string, args ...string) (string, string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, is := n.RuntimeService(), n.ImageService()
	if _, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		t.Fatalf("PullImage %s: %v", image, err)
	}
	sbCfg := n.SandboxConfig(name, "uid-"+name)
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId:  sb.PodSandboxId,
		Config:        n.ContainerConfig("main", image, args...),
		SandboxConfig: sbCfg,
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return sb.PodSandboxId, c.ContainerId, sbCfg
}

func TestRealNodeRunContainer(t *testing.T) {
	n := Start(t)
	img := n.PushImage(t, "syncpod/workload")
	_, cid, sbCfg := runPod(t, n, "run", img, "echo", "hello from workload", "sleep", "100ms", "exit", "3")
	st := n.WaitContainerExited(t, cid, time.Minute)
	if st.GetExitCode() != 3 {
		t.Errorf("exit code = %d, want 3 (status %v)", st.GetExitCode(), st)
	}
	logb, err := os.ReadFile(ContainerLogPath(sbCfg, "main"))
	if err != nil {
		t.Fatalf("container log: %v", err)
	}
	if !strings.Contains(string(logb), "stdout F hello from workload") {
		t.Errorf("container log %q lacks the echoed line", logb)
	}
}

func TestRealNodeRegistryCounts(t *testing.T) {
	n := Start(t)
	const size = 3 << 20
	img := n.PushImage(t, "syncpod/big", WithSize(size), WithLayers(3), WithTag("v1"))
	layers := n.ImageLayers(img)
	if len(layers) != 3 {
		t.Fatalf("ImageLayers(%s) = %v, want 3 layers", img, layers)
	}
	for d, c := range n.BlobFetches() {
		t.Errorf("blob %s fetched %d times before any pull", d, c)
	}
	ctx := ctxT(t)
	is := n.ImageService()
	for range 2 {
		if _, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
			t.Fatalf("PullImage: %v", err)
		}
	}
	fetches := n.BlobFetches()
	for _, l := range layers {
		if fetches[l] != 1 {
			t.Errorf("layer %s fetched %d times over two pulls, want 1 (all fetches: %v)", l, fetches[l], fetches)
		}
	}
	st, err := is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: img}})
	if err != nil {
		t.Fatalf("ImageStatus: %v", err)
	}
	if got := st.GetImage().GetSize(); got < size {
		t.Errorf("image size = %d, want at least %d", got, size)
	}
	if m := n.ManifestFetches(); len(m) == 0 {
		t.Errorf("no manifest fetches recorded; requests: %v", n.Requests())
	}
	n.ResetRegistryCounts()
	if r := n.Requests(); len(r) != 0 {
		t.Errorf("Requests after reset = %v", r)
	}
}

func TestRealNodeKillAndRestart(t *testing.T) {
	n := Start(t)
	img := n.PushImage(t, "syncpod/workload")
	sbID, cid, _ := runPod(t, n, "survivor", img, "pause")
	oldPID := n.ContainerdPID()
	shims := shimPIDs(n.socket)
	if len(shims) == 0 {
		t.Fatalf("no shim found for %s", n.socket)
	}

	n.KillContainerd(t)
	if n.ContainerdPID() != 0 {
		t.Errorf("ContainerdPID after kill = %d, want 0", n.ContainerdPID())
	}
	if err := syscall.Kill(oldPID, 0); err == nil && !isZombie(oldPID) {
		t.Errorf("containerd %d still running after KillContainerd", oldPID)
	}
	if got := shimPIDs(n.socket); fmt.Sprint(got) != fmt.Sprint(shims) {
		t.Errorf("shims after kill = %v, want %v still running", got, shims)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := n.RuntimeService().Version(ctx, &runtimeapi.VersionRequest{})
	cancel()
	if err == nil {
		t.Errorf("Version answered while containerd was killed")
	}

	n.RestartContainerd(t)
	if pid := n.ContainerdPID(); pid == 0 || pid == oldPID {
		t.Errorf("ContainerdPID after restart = %d (before: %d)", pid, oldPID)
	}
	c := ctxT(t)
	st, err := n.RuntimeService().ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: cid})
	if err != nil {
		t.Fatalf("ContainerStatus after restart: %v", err)
	}
	if s := st.GetStatus().GetState(); s != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("container state after restart = %v, want RUNNING", s)
	}
	ps, err := n.RuntimeService().PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID})
	if err != nil {
		t.Fatalf("PodSandboxStatus after restart: %v", err)
	}
	if s := ps.GetStatus().GetState(); s != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("sandbox state after restart = %v, want READY", s)
	}
}

// leftovers describes what a torn-down node left on the machine.
func leftovers(socket, dir string, pid int, registry string) []string {
	var out []string
	if pid != 0 {
		if err := syscall.Kill(pid, 0); err == nil && !isZombie(pid) {
			out = append(out, fmt.Sprintf("containerd %d running", pid))
		}
	}
	if s := shimPIDs(socket); len(s) > 0 {
		out = append(out, fmt.Sprintf("shims %v", s))
	}
	if m, _ := mountsUnder(dir); len(m) > 0 {
		out = append(out, fmt.Sprintf("mounts %v", m))
	}
	if _, err := os.Stat(dir); err == nil {
		out = append(out, "dir "+dir)
	}
	if c, err := net.DialTimeout("tcp", registry, time.Second); err == nil {
		c.Close()
		out = append(out, "registry "+registry+" listening")
	}
	return out
}

func TestRealNodeTeardownLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, n *Node)
	}{
		{"running", func(*testing.T, *Node) {}},
		// containerd is down at cleanup: the pods must still go.
		{"after-kill", func(t *testing.T, n *Node) { n.KillContainerd(t) }},
		// The shims and containers outlive containerd's own state.
		{"lost-state", func(t *testing.T, n *Node) {
			n.KillContainerd(t)
			os.Remove(n.cfgPath)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var socket, dir, registry string
			var pid int
			var shims, procs []int
			ok := t.Run("node", func(t *testing.T) {
				n := Start(t)
				img := n.PushImage(t, "syncpod/workload")
				runPod(t, n, "a", img, "pause")
				runPod(t, n, "b", img, "ignore-term", "pause")
				socket, dir, registry, pid = n.socket, n.Dir, n.Registry, n.ContainerdPID()
				shims = shimPIDs(socket)
				procs = containerPIDs(t, n)
				if len(shims) == 0 {
					t.Fatalf("no shims running")
				}
				if m, _ := mountsUnder(dir); len(m) == 0 {
					t.Fatalf("no mounts under %s while pods run", dir)
				}
				tc.before(t, n)
			})
			if !ok || socket == "" {
				t.Skip("node did not run")
			}
			if l := leftovers(socket, dir, pid, registry); len(l) > 0 {
				t.Errorf("after teardown: %s", strings.Join(l, "; "))
			}
			for _, s := range shims {
				if processAlive(s) {
					t.Errorf("shim %d still running", s)
				}
			}
			if len(procs) != 4 { // two pods, each with a pause and a workload
				t.Errorf("container processes seen = %v, want 4", procs)
			}
			for _, p := range procs {
				if processAlive(p) {
					t.Errorf("container process %d still running", p)
				}
			}
		})
	}
}

// containerPIDs reads the init PIDs of the node's containers from runc's
// state files.
func containerPIDs(t *testing.T, n *Node) []int {
	t.Helper()
	files, err := filepath.Glob(n.path("runc", "k8s.io", "*", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			InitProcessPid int `json:"init_process_pid"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		pids = append(pids, st.InitProcessPid)
	}
	return pids
}

// TestRealNodeReapsAfterDeadTestProcess starts a node in a child test
// process that exits without its cleanups, as on a -timeout panic, and
// checks that the next Start removes what it left.
func TestRealNodeReapsAfterDeadTestProcess(t *testing.T) {
	if os.Getenv("TESTNODE_DIE_WITH_NODE") == "1" {
		return // the child's work is in TestHelperDieWithNode
	}
	n := Start(t) // gates like any real-node test, and provides runc
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDieWithNode$", "-test.v")
	cmd.Env = append(os.Environ(), "TESTNODE_DIE_WITH_NODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var dir string
	var pid int
	for _, line := range strings.Split(string(out), "\n") {
		if _, rest, ok := strings.Cut(line, "NODE "); ok {
			fmt.Sscanf(rest, "%s %d", &dir, &pid)
		}
	}
	if dir == "" || pid == 0 {
		t.Fatalf("child printed no node:\n%s", out)
	}
	socket := filepath.Join(dir, "containerd.sock")
	if !processAlive(pid) || len(shimPIDs(socket)) == 0 {
		t.Fatalf("child left no containerd (%d) or shims to reap", pid)
	}
	if !OwnerGone(dir) {
		t.Fatalf("owner of %s not seen as gone", dir)
	}
	// Only this directory: other test binaries may be running the same
	// test right now.
	t.Logf("reaped: %s", reapNodeDir(dir, n.bins.runc))
	if l := leftovers(socket, dir, pid, "127.0.0.1:1"); len(l) > 0 {
		t.Errorf("after reaping: %s", strings.Join(l, "; "))
	}
}

// TestHelperDieWithNode runs only in the child of
// TestRealNodeReapsAfterDeadTestProcess.
func TestHelperDieWithNode(t *testing.T) {
	if os.Getenv("TESTNODE_DIE_WITH_NODE") != "1" {
		t.Skip("helper for TestRealNodeReapsAfterDeadTestProcess")
	}
	n := Start(t)
	img := n.PushImage(t, "syncpod/workload")
	runPod(t, n, "orphan", img, "pause")
	fmt.Printf("NODE %s %d\n", n.Dir, n.ContainerdPID())
	os.Exit(0) // no cleanups, like a test binary killed by -timeout
}

// TestRealNodeParallelNodes runs nodes side by side in one test binary, as
// parallel tests do; each must see only its own pods.
func TestRealNodeParallelNodes(t *testing.T) {
	for i := range 3 {
		t.Run(fmt.Sprint("node", i), func(t *testing.T) {
			t.Parallel()
			n := Start(t)
			img := n.PushImage(t, "syncpod/workload", WithTag(fmt.Sprint("v", i)))
			_, cid, _ := runPod(t, n, "p", img, "exit", fmt.Sprint(10+i))
			if st := n.WaitContainerExited(t, cid, time.Minute); st.GetExitCode() != int32(10+i) {
				t.Errorf("exit code = %d, want %d", st.GetExitCode(), 10+i)
			}
			pods, err := n.RuntimeService().ListPodSandbox(ctxT(t), &runtimeapi.ListPodSandboxRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if len(pods.GetItems()) != 1 {
				t.Errorf("node sees %d pods, want its own 1", len(pods.GetItems()))
			}
		})
	}
}

// TestRealNodeEventsAndStop checks what other packages rely on: the CRI
// event stream reports a container's life, and the workload program's
// signal handling gives StopContainer the expected exit codes.
func TestRealNodeEventsAndStop(t *testing.T) {
	n := Start(t)
	img := n.PushImage(t, "syncpod/workload")

	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	stream, err := n.RuntimeService().GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatalf("GetContainerEvents: %v", err)
	}
	events := make(chan *runtimeapi.ContainerEventResponse, 100)
	go func() {
		defer close(events)
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			events <- ev
		}
	}()

	rs := n.RuntimeService()
	_, polite, _ := runPod(t, n, "polite", img, "pause")
	_, stubborn, _ := runPod(t, n, "stubborn", img, "ignore-term", "pause")
	if _, err := rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: polite, Timeout: 30}); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if _, err := rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: stubborn, Timeout: 1}); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if st := n.WaitContainerExited(t, polite, time.Minute); st.GetExitCode() != 0 {
		t.Errorf("pause stopped by SIGTERM: exit code %d, want 0", st.GetExitCode())
	}
	if st := n.WaitContainerExited(t, stubborn, time.Minute); st.GetExitCode() != 137 {
		t.Errorf("ignore-term stopped by SIGKILL: exit code %d, want 137", st.GetExitCode())
	}

	want := map[runtimeapi.ContainerEventType]bool{
		runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT: true,
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT: true,
		runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT: true,
	}
	for len(want) > 0 {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("event stream ended; still waiting for %v", want)
			}
			if ev.GetContainerId() == polite {
				if ev.GetPodSandboxStatus() == nil {
					t.Errorf("event %v without PodSandboxStatus", ev.GetContainerEventType())
				}
				delete(want, ev.GetContainerEventType())
			}
		case <-ctx.Done():
			t.Fatalf("no events %v for %s", want, polite)
		}
	}
	cancel()
	for range events { // the receiver ends with the stream
	}
}
