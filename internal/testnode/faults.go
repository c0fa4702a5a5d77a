package testnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncpod/syncpod/internal/typednil"
)

// ErrContainerdDown is returned (wrapped in a *FaultError) by a fault that
// needs containerd running while it is down (after KillContainerd, after
// teardown).
var ErrContainerdDown = errors.New("testnode: containerd is not running")

// ErrFaultActive is returned (wrapped in a *FaultError) when a fault is
// started on a node where the same fault is already active: one freeze and
// one slow disk at a time.
var ErrFaultActive = errors.New("testnode: the fault is already active on this node")

// ArgError is a bad argument to a method: a nil testing.TB, a negative
// duration or limit, a Node not made by Start.
type ArgError struct {
	// Method is the method called.
	Method string
	// Arg names the argument.
	Arg string
	// Reason says what is wrong with it.
	Reason string
}

// Error returns "testnode: Method: Arg Reason".
func (e *ArgError) Error() string {
	return "testnode: " + e.Method + ": " + e.Arg + " " + e.Reason
}

// FaultError is a fault that could not be applied or undone. Err is the
// cause (ErrContainerdDown, ErrFaultActive, a cgroup file's write error).
type FaultError struct {
	// Fault is "freeze" or "slow disk".
	Fault string
	// Op is the step that failed ("move containerd", "thaw", ...).
	Op string
	// Err is the cause.
	Err error
}

// Error returns "testnode: Fault: Op: Err".
func (e *FaultError) Error() string {
	return "testnode: " + e.Fault + ": " + e.Op + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *FaultError) Unwrap() error { return e.Err }

// cgroupFS is where the cgroup v1 hierarchies are mounted.
const cgroupFS = "/sys/fs/cgroup"

// faultState is a node's active faults. freeze and disk are guarded by
// Node.mu; the roots are set before the node is shared (tests point them
// elsewhere to force a fallback).
type faultState struct {
	freezerRoot string // "" means cgroupFS/freezer
	blkioRoot   string // "" means cgroupFS/blkio
	freeze      *Freeze
	disk        *DiskThrottle
}

func (s *faultState) root(controller string) string {
	switch {
	case controller == "freezer" && s.freezerRoot != "":
		return s.freezerRoot
	case controller == "blkio" && s.blkioRoot != "":
		return s.blkioRoot
	}
	return filepath.Join(cgroupFS, controller)
}

// cgroupPrefix starts the name of every cgroup a node makes:
// syncpod-<owner pid>-<node dir name>, so that a later run can tell whose
// it is and whether that process is gone.
const cgroupPrefix = "syncpod-"

func cgroupName(ownerPID int, nodeDir string) string {
	return fmt.Sprintf("%s%d-%s", cgroupPrefix, ownerPID, filepath.Base(nodeDir))
}

// cgroupOwner parses the owner PID out of a name made by cgroupName.
func cgroupOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, cgroupPrefix)
	if !ok {
		return 0, false
	}
	num, dir, ok := strings.Cut(rest, "-")
	if !ok || !strings.HasPrefix(dir, nodeDirPattern) {
		return 0, false
	}
	pid, err := strconv.Atoi(num)
	return pid, err == nil && pid > 0
}

// checkNode refuses a nil Node, one not made by Start, and a nil TB.
func (n *Node) checkNode(method string, t testing.TB) error {
	if n == nil || n.Dir == "" || n.bins.containerd == "" {
		return &ArgError{Method: method, Arg: "Node", Reason: "is not initialized: use Start"}
	}
	if typednil.Is(t) {
		return &ArgError{Method: method, Arg: "t", Reason: "must not be nil"}
	}
	return nil
}

// procCgroup returns pid's cgroup path (relative to the hierarchy's root)
// in the cgroup v1 hierarchy that holds controller.
func procCgroup(pid int, controller string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				return parts[2], nil
			}
		}
	}
	return "", fmt.Errorf("process %d is in no %s cgroup (no cgroup v1 %s hierarchy?)", pid, controller, controller)
}

// writeCgroup writes one value to a cgroup control file.
func writeCgroup(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	return nil
}

// readIDs reads a cgroup's cgroup.procs or tasks file.
func readIDs(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, f := range strings.Fields(string(b)) {
		if id, err := strconv.Atoi(f); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// threadIDs lists the threads of pid.
func threadIDs(pid int) ([]int, error) {
	entries, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// moveProcess moves every thread of pid into the cgroup dir: the PID into
// cgroup.procs (which moves the thread group), then any thread the tasks
// file still lacks into tasks, one TID at a time, as cgroup v1 allows.
func moveProcess(dir string, pid int) error {
	if err := writeCgroup(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		return err
	}
	tids, err := threadIDs(pid)
	if err != nil {
		return fmt.Errorf("threads of %d: %w", pid, err)
	}
	in, err := readIDs(filepath.Join(dir, "tasks"))
	if err != nil {
		return err
	}
	have := make(map[int]bool, len(in))
	for _, id := range in {
		have[id] = true
	}
	for _, tid := range tids {
		if have[tid] {
			continue
		}
		if err := writeCgroup(filepath.Join(dir, "tasks"), strconv.Itoa(tid)); err != nil && !gone(err) {
			return err
		}
	}
	return nil
}

// gone reports whether a cgroup write failed because the process or
// thread has exited meanwhile.
func gone(err error) bool { return errors.Is(err, syscall.ESRCH) }

// removeCgroup empties the cgroup dir and removes it: a freezer is thawed
// first, every process still in it is moved to dest(pid), and rmdir is
// retried for a few seconds (a process that just exited leaves only once it
// has been reaped). A dir that does not exist is not an error.
func removeCgroup(dir string, thaw bool, dest func(pid int) string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	if thaw {
		if err := writeCgroup(filepath.Join(dir, "freezer.state"), "THAWED"); err != nil {
			errs = append(errs, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, _ := readIDs(filepath.Join(dir, "cgroup.procs"))
		for _, pid := range pids {
			if err := writeCgroup(filepath.Join(dest(pid), "cgroup.procs"), strconv.Itoa(pid)); err != nil && !gone(err) {
				errs = append(errs, err)
			}
		}
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return errors.Join(errs...)
		}
		if time.Now().After(deadline) {
			return errors.Join(append(errs, fmt.Errorf("rmdir %s: %w", dir, err))...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reapFaultCgroups removes the freezer and blkio cgroups named after a
// node directory whose owner is gone, thawing a frozen containerd, and sends
// SIGCONT to a containerd the node stopped with SIGSTOP (when the recorded
// PID still runs this directory's containerd). Everything in such a cgroup
// goes back to the hierarchy's root. It says what it did.
func reapFaultCgroups(dir string) []string {
	var did []string
	if owner, ok := readPID(filepath.Join(dir, ownerFile)); ok {
		name := cgroupName(owner, dir)
		for _, c := range []string{"freezer", "blkio"} {
			if msg := reapCgroup(filepath.Join(cgroupFS, c), name, c == "freezer"); msg != "" {
				did = append(did, msg)
			}
		}
	}
	if pid, ok := readPID(filepath.Join(dir, stoppedFile)); ok && processAlive(pid) {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if strings.Contains(string(cmdline), filepath.Join(dir, "config.toml")) && syscall.Kill(pid, syscall.SIGCONT) == nil {
			did = append(did, fmt.Sprintf("sent SIGCONT to stopped containerd %d", pid))
		}
	}
	return did
}

// reapOrphanCgroups removes the node cgroups under each hierarchy whose
// owning test process is gone, node directory or not (a teardown that
// removed the directory but failed to remove the cgroup).
func reapOrphanCgroups() []string {
	var did []string
	for _, c := range []string{"freezer", "blkio"} {
		root := filepath.Join(cgroupFS, c)
		matches, _ := filepath.Glob(filepath.Join(root, cgroupPrefix+"*"))
		for _, m := range matches {
			owner, ok := cgroupOwner(filepath.Base(m))
			if !ok || owner == os.Getpid() || processAlive(owner) {
				continue
			}
			if msg := reapCgroup(root, filepath.Base(m), c == "freezer"); msg != "" {
				did = append(did, msg)
			}
		}
	}
	return did
}

func reapCgroup(root, name string, thaw bool) string {
	dir := filepath.Join(root, name)
	if _, err := os.Stat(dir); err != nil {
		return ""
	}
	pids, _ := readIDs(filepath.Join(dir, "cgroup.procs"))
	if err := removeCgroup(dir, thaw, func(int) string { return root }); err != nil {
		return fmt.Sprintf("could not remove cgroup %s: %v", dir, err)
	}
	verb := "removed"
	if thaw {
		verb = "thawed and removed"
	}
	return fmt.Sprintf("%s cgroup %s (processes %v moved to %s)", verb, dir, pids, root)
}

// endFaults ends the node's active faults (thaws a freeze, undoes a slow
// disk); teardown calls it first, so that a fault whose own cleanup did not
// run cannot hang the teardown.
func (n *Node) endFaults(t testing.TB) {
	n.mu.Lock()
	f, d := n.faults.freeze, n.faults.disk
	n.mu.Unlock()
	if f != nil {
		if err := f.Thaw(); err != nil {
			t.Errorf("testnode: teardown: %v", err)
		}
	}
	if d != nil {
		if err := d.Undo(); err != nil {
			t.Errorf("testnode: teardown: %v", err)
		}
	}
}

// faultLeftovers lists the cgroups of this node that still exist.
func (n *Node) faultLeftovers() []string {
	var out []string
	name := cgroupName(os.Getpid(), n.Dir)
	for _, c := range []string{"freezer", "blkio"} {
		dir := filepath.Join(n.faults.root(c), name)
		if _, err := os.Stat(dir); err == nil {
			out = append(out, "cgroup "+dir)
		}
	}
	return out
}
