package testnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Files in a node directory that let a later run clean up after a test
// binary that died without running its cleanups (a go test -timeout panic,
// a SIGKILL).
const (
	nodeDirPattern = "spnode-"
	pidFile        = "containerd.pid"
)

var staleOnce sync.Once

// reapStaleNodes removes node directories whose owning test process is
// gone, with the containerd, shims, containers and mounts they left. It
// touches only what such a directory names: the containerd whose PID it
// recorded (if that PID still runs containerd with this directory's
// config), shims whose -address is its socket and containers in its runc
// root.
func reapStaleNodes(t testing.TB, runc string) {
	staleOnce.Do(func() { reapStale(t, runc) })
}

func reapStale(t testing.TB, runc string) {
	if did := reapOrphanCgroups(); len(did) > 0 {
		t.Logf("testnode: cleaned up after a dead test process: %s", strings.Join(did, ", "))
	}
	dirs, _ := filepath.Glob(filepath.Join(shortTempDir(), nodeDirPattern+"*"))
	for _, dir := range dirs {
		if !OwnerGone(dir) {
			continue
		}
		if msg := reapNodeDir(dir, runc); msg != "" {
			t.Logf("testnode: cleaned up after a dead test process: %s", msg)
		}
	}
}

// OwnerGone reports whether the process that wrote dir's owner file
// (WriteOwner) has exited. Directories without an owner file (being created
// right now, or not ours) and those of this process are kept. Harnesses that
// leave processes and files behind when a test binary dies use it to find
// what a later run may remove.
func OwnerGone(dir string) bool {
	pid, ok := readPID(filepath.Join(dir, ownerFile))
	if !ok || pid == os.Getpid() {
		return false
	}
	return !processAlive(pid)
}

// KillRecorded kills (SIGKILL) the process whose PID the file pidPath
// holds, if it still runs and its command line contains mark (so that a
// PID reused by another program is left alone), and waits up to 10 s for it
// to go. It returns the PID it killed, or 0.
func KillRecorded(pidPath, mark string) int {
	pid, ok := readPID(pidPath)
	if !ok || !processAlive(pid) {
		return 0
	}
	cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if !strings.Contains(string(cmdline), mark) {
		return 0
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitGone(pid, 10*time.Second)
	return pid
}

func readPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil && !isZombie(pid)
}

// reapNodeDir tears down what a dead test left in dir and says what it did.
func reapNodeDir(dir, runc string) string {
	// First thaw: a frozen containerd cannot act on SIGKILL.
	did := reapFaultCgroups(dir)
	socket := filepath.Join(dir, "containerd.sock")
	if pid := KillRecorded(filepath.Join(dir, pidFile), filepath.Join(dir, "config.toml")); pid != 0 {
		did = append(did, fmt.Sprintf("killed containerd %d", pid))
	}
	namespaces, _ := os.ReadDir(filepath.Join(dir, "runc"))
	for _, ns := range namespaces {
		root := filepath.Join(dir, "runc", ns.Name())
		ids, _ := os.ReadDir(root)
		for _, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if exec.CommandContext(ctx, runc, "--root", root, "delete", "--force", id.Name()).Run() == nil {
				did = append(did, "deleted container "+id.Name())
			}
			cancel()
		}
	}
	if pids := killShims(socket); len(pids) > 0 {
		did = append(did, fmt.Sprintf("killed shims %v", pids))
	}
	if mps, _ := mountsUnder(dir); len(mps) > 0 {
		_ = unmountUnder(dir)
		did = append(did, fmt.Sprintf("unmounted %d mounts", len(mps)))
	}
	if err := os.RemoveAll(dir); err == nil {
		did = append(did, "removed "+dir)
	}
	return strings.Join(did, ", ")
}

// waitGone polls until pid has exited or timeout passes.
func waitGone(pid int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for processAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}
