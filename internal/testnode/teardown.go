package testnode

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// teardown removes everything the node made. It runs from t.Cleanup, also
// after a failed or half-started test, and reports what it could not undo.
func (n *Node) teardown(t testing.TB) {
	if t.Failed() && n.logPath != "" {
		t.Logf("testnode: containerd log tail (%s):\n%s", n.logPath, LogTail(n.logPath, 40))
	}
	n.endFaults(t) // a frozen containerd would hang every step below
	if n.conn != nil {
		n.removePods(t)
		n.stopContainerd(syscall.SIGTERM, 10*time.Second)
		_ = n.conn.Close()
	}
	var leftovers []string
	if n.Dir != "" {
		leftovers = append(leftovers, n.faultLeftovers()...)
		n.deleteContainers(t)
		if pids := killShims(n.socket); len(pids) > 0 {
			t.Logf("testnode: killed shims left by this node: %v", pids)
		}
		if alive := shimPIDs(n.socket); len(alive) > 0 {
			leftovers = append(leftovers, fmt.Sprintf("shim processes %v", alive))
		}
		if err := unmountUnder(n.Dir); err != nil {
			leftovers = append(leftovers, err.Error())
		}
		if err := RemoveAll(n.Dir); err != nil {
			leftovers = append(leftovers, err.Error())
		}
	}
	if n.reg != nil {
		if err := n.reg.close(); err != nil {
			t.Logf("testnode: stop registry: %v", err)
		}
	}
	if err := n.removeNetNS(); err != nil {
		leftovers = append(leftovers, err.Error())
	}
	if len(leftovers) > 0 {
		t.Errorf("testnode: teardown left behind: %s", strings.Join(leftovers, "; "))
	}
}

// removePods stops and removes every sandbox (and so every container)
// through the CRI. If containerd is down, a killed-and-not-restarted node,
// it is started once more for this.
func (n *Node) removePods(t testing.TB) {
	if n.ContainerdPID() == 0 {
		if _, err := os.Stat(n.cfgPath); err != nil {
			return
		}
		if err := n.startContainerd(); err != nil {
			t.Logf("testnode: teardown: cannot start containerd to remove pods: %v", err)
			return
		}
	}
	client := n.RuntimeService()
	call := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return f(ctx)
	}
	var pods *runtimeapi.ListPodSandboxResponse
	err := call(func(ctx context.Context) (err error) {
		pods, err = client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		return err
	})
	if err != nil {
		t.Logf("testnode: teardown: ListPodSandbox: %v", err)
		return
	}
	for _, p := range pods.GetItems() {
		id := p.GetId()
		if err := call(func(ctx context.Context) error {
			_, err := client.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
			return err
		}); err != nil {
			t.Logf("testnode: teardown: StopPodSandbox %s: %v", id, err)
		}
		if err := call(func(ctx context.Context) error {
			_, err := client.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
			return err
		}); err != nil {
			t.Logf("testnode: teardown: RemovePodSandbox %s: %v", id, err)
		}
	}
}

// deleteContainers force-deletes, with runc, any container still in the
// node's private runc root: killing a shim would leave its container's
// processes running.
func (n *Node) deleteContainers(t testing.TB) {
	namespaces, _ := os.ReadDir(n.path("runc"))
	for _, ns := range namespaces {
		root := n.path("runc", ns.Name())
		ids, _ := os.ReadDir(root)
		for _, id := range ids {
			if !id.IsDir() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			out, err := exec.CommandContext(ctx, n.bins.runc, "--root", root, "delete", "--force", id.Name()).CombinedOutput()
			cancel()
			if err != nil {
				t.Logf("testnode: teardown: runc delete --force %s: %v: %s", id.Name(), err, out)
			} else {
				t.Logf("testnode: teardown: force-deleted container %s left by containerd", id.Name())
			}
		}
	}
}

// shimPIDs finds the shims serving the containerd at socket: their command
// line carries "-address <socket>". Shims of other nodes, and of any other
// containerd on the machine, have another address.
func shimPIDs(socket string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		if hasAddress(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), socket) && !isZombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hasAddress reports whether args name socket as their -address.
func hasAddress(args []string, socket string) bool {
	if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") {
		return false
	}
	for i, a := range args {
		switch {
		case (a == "-address" || a == "--address") && i+1 < len(args) && args[i+1] == socket:
			return true
		case a == "-address="+socket || a == "--address="+socket:
			return true
		}
	}
	return false
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true // gone
	}
	// The state follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

// killShims SIGKILLs this node's shims by PID and waits until they are
// gone, returning the PIDs it signalled.
func killShims(socket string) []int {
	pids := shimPIDs(socket)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(pids) > 0 && time.Now().Before(deadline) {
		alive := pids[:0]
		for _, pid := range pids {
			if !isZombie(pid) {
				alive = append(alive, pid)
			}
		}
		pids = alive
		if len(pids) > 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return pids
}

// mountsUnder lists the mount points at or below dir in this mount
// namespace, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for space, ...) of
// /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder detaches every mount below dir and reports any that stay.
func unmountUnder(dir string) error {
	for range 3 {
		mps, err := mountsUnder(dir)
		if err != nil {
			return fmt.Errorf("read mounts: %w", err)
		}
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
	if mps, _ := mountsUnder(dir); len(mps) > 0 {
		return fmt.Errorf("mounts %v", mps)
	}
	return nil
}

// RemoveAll removes dir, retrying for half a second: files of a process
// that just exited (a shim, a kubelet) can still be going away.
func RemoveAll(dir string) error {
	var err error
	for range 5 {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}
