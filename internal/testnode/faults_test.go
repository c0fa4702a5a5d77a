package testnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// versionErr calls Version on the node's connection with a deadline.
func versionErr(n *Node, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := n.RuntimeService().Version(ctx, &runtimeapi.VersionRequest{})
	return err
}

// inCgroup reports pid's cgroup (relative) in the controller's hierarchy.
func inCgroup(t *testing.T, pid int, controller string) string {
	t.Helper()
	cg, err := procCgroup(pid, controller)
	if err != nil {
		t.Fatalf("cgroup of %d: %v", pid, err)
	}
	return cg
}

// allThreadsIn checks that every thread of pid is listed in the cgroup's
// tasks file.
func allThreadsIn(t *testing.T, dir string, pid int) {
	t.Helper()
	tids, err := threadIDs(pid)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := readIDs(filepath.Join(dir, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		if !slices.Contains(tasks, tid) {
			t.Errorf("thread %d of %d not in %s/tasks %v", tid, pid, dir, tasks)
		}
	}
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists (stat: %v)", path, err)
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestRealNodeFreezeCgroup(t *testing.T) {
	n := Start(t)
	img := n.PushImage(t, "syncpod/workload")
	runPod(t, n, "frozen", img, "pause")
	pid := n.ContainerdPID()
	origCg := inCgroup(t, pid, "freezer")
	shims := shimPIDs(n.socket)
	if len(shims) == 0 {
		t.Fatal("no shim running")
	}

	f, err := n.FreezeFor(t, 2*time.Second)
	if err != nil {
		t.Fatalf("FreezeFor: %v", err)
	}
	Need(t, "the cgroup v1 freezer", f.Fallback())
	t.Logf("froze containerd %d with %s", f.PID(), f.Method())
	if f.Method() != FreezeCgroup || f.PID() != pid {
		t.Fatalf("Method, PID = %s, %d; want %s, %d", f.Method(), f.PID(), FreezeCgroup, pid)
	}
	cg := f.Cgroup()
	if want := filepath.Join(cgroupFS, "freezer", cgroupName(os.Getpid(), n.Dir)); cg != want {
		t.Errorf("Cgroup = %s, want %s", cg, want)
	}
	if s := readTrim(t, filepath.Join(cg, "freezer.state")); s != "FROZEN" {
		t.Errorf("freezer.state = %s during the freeze", s)
	}
	if got := inCgroup(t, pid, "freezer"); got != "/"+filepath.Base(cg) {
		t.Errorf("containerd's freezer cgroup = %s, want /%s", got, filepath.Base(cg))
	}
	allThreadsIn(t, cg, pid)
	if procs, _ := readIDs(filepath.Join(cg, "cgroup.procs")); !slices.Equal(procs, []int{pid}) {
		t.Errorf("cgroup.procs = %v, want only containerd %d", procs, pid)
	}
	for _, s := range shims {
		if got := inCgroup(t, s, "freezer"); got == "/"+filepath.Base(cg) {
			t.Errorf("shim %d was frozen with containerd", s)
		}
	}
	if err := versionErr(n, 500*time.Millisecond); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("Version during the freeze: %v, want DeadlineExceeded", err)
	}
	if _, err := n.FreezeContainerd(t); !errors.Is(err, ErrFaultActive) {
		t.Errorf("second freeze: %v, want ErrFaultActive", err)
	}

	<-f.Done() // the timer thaws
	if err := versionErr(n, 30*time.Second); err != nil {
		t.Errorf("Version after the thaw: %v", err)
	}
	mustNotExist(t, cg)
	if got := inCgroup(t, pid, "freezer"); got != origCg {
		t.Errorf("containerd's freezer cgroup after thaw = %s, want %s", got, origCg)
	}
	if err := f.Thaw(); err != nil {
		t.Errorf("Thaw after the timer's: %v", err)
	}
}

func TestRealNodeFreezeSIGSTOPFallback(t *testing.T) {
	n := Start(t)
	n.faults.freezerRoot = n.path("no-freezer")
	pid := n.ContainerdPID()
	f, err := n.FreezeContainerd(t)
	if err != nil {
		t.Fatalf("FreezeContainerd: %v", err)
	}
	t.Logf("froze containerd with %s because %v", f.Method(), f.Fallback())
	if f.Method() != FreezeSIGSTOP || f.Fallback() == nil || f.Cgroup() != "" {
		t.Fatalf("Method, Fallback, Cgroup = %s, %v, %q; want SIGSTOP, the freezer's error, none", f.Method(), f.Fallback(), f.Cgroup())
	}
	if s := procState(pid); s != 'T' {
		t.Errorf("containerd state %c during the freeze, want T", s)
	}
	if got, _ := readPID(n.path(stoppedFile)); got != pid {
		t.Errorf("%s records %d, want %d", stoppedFile, got, pid)
	}
	if err := versionErr(n, 500*time.Millisecond); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("Version during the freeze: %v, want DeadlineExceeded", err)
	}
	if err := f.Thaw(); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
	if s := procState(pid); s == 'T' {
		t.Errorf("containerd still stopped after Thaw")
	}
	mustNotExist(t, n.path(stoppedFile))
	if err := versionErr(n, 30*time.Second); err != nil {
		t.Errorf("Version after the thaw: %v", err)
	}
}

// TestRealNodeFreezeCleanup runs the cleanup a freeze registers, as the
// testing package does after a failed test body.
func TestRealNodeFreezeCleanup(t *testing.T) {
	n := Start(t)
	tb := &iterationTB{TB: t}
	f, err := n.FreezeContainerd(tb)
	if err != nil {
		t.Fatalf("FreezeContainerd: %v", err)
	}
	if len(tb.cleanups) != 1 {
		t.Fatalf("FreezeContainerd registered %d cleanups, want 1", len(tb.cleanups))
	}
	select {
	case <-f.Done():
		t.Fatal("Done closed before the thaw")
	default:
	}
	tb.runCleanups()
	select {
	case <-f.Done():
	default:
		t.Fatal("the cleanup did not thaw")
	}
	if f.Cgroup() != "" {
		mustNotExist(t, f.Cgroup())
	}
	if err := versionErr(n, 30*time.Second); err != nil {
		t.Errorf("Version after the cleanup: %v", err)
	}
	// A new freeze may start once the last one ended.
	f2, err := n.FreezeFor(t, time.Millisecond)
	if err != nil {
		t.Fatalf("freeze after the cleanup: %v", err)
	}
	<-f2.Done()
}

// dropTB drops cleanups, as a freeze whose own cleanup never runs.
type dropTB struct{ testing.TB }

func (dropTB) Cleanup(func()) {}

// TestRealNodeFreezeTeardownThaws checks that the node's own teardown
// ends a freeze whose cleanup did not run, and that KillContainerd and
// RestartContainerd end a freeze.
func TestRealNodeFreezeTeardownThaws(t *testing.T) {
	var cg string
	var pid int
	ok := t.Run("node", func(t *testing.T) {
		n := Start(t)
		img := n.PushImage(t, "syncpod/workload")
		runPod(t, n, "p", img, "pause")

		f, err := n.FreezeContainerd(t)
		if err != nil {
			t.Fatal(err)
		}
		n.RestartContainerd(t)
		if err := f.Thaw(); err != nil {
			t.Errorf("Thaw after RestartContainerd: %v", err)
		}
		if f.Cgroup() != "" {
			mustNotExist(t, f.Cgroup())
		}
		if err := versionErr(n, 30*time.Second); err != nil {
			t.Errorf("Version after restart: %v", err)
		}

		f, err = n.FreezeContainerd(t)
		if err != nil {
			t.Fatal(err)
		}
		old := f.PID()
		n.KillContainerd(t)
		<-f.Done()
		if processAlive(old) {
			t.Errorf("frozen containerd %d survived KillContainerd", old)
		}
		if _, err := n.FreezeContainerd(t); !errors.Is(err, ErrContainerdDown) {
			t.Errorf("freeze while containerd is down: %v, want ErrContainerdDown", err)
		}
		n.RestartContainerd(t)

		f, err = n.FreezeContainerd(dropTB{t})
		if err != nil {
			t.Fatal(err)
		}
		cg, pid = f.Cgroup(), f.PID()
	})
	if !ok {
		t.Fatal("the node's test or its teardown failed")
	}
	if cg != "" {
		mustNotExist(t, cg)
	}
	if processAlive(pid) {
		t.Errorf("containerd %d still running after teardown", pid)
	}
}

func TestRealNodeSlowDisk(t *testing.T) {
	n := Start(t)
	const size = 64 << 20
	fast := n.PushImage(t, "syncpod/disk", WithSize(size), WithTag("fast"))
	slow := n.PushImage(t, "syncpod/disk", WithSize(size), WithTag("slow"))
	img := n.PushImage(t, "syncpod/workload")
	runPod(t, n, "disk", img, "pause")
	pid := n.ContainerdPID()
	shims := shimPIDs(n.socket)
	if len(shims) == 0 {
		t.Fatal("no shim running")
	}
	before := map[int]string{pid: inCgroup(t, pid, "blkio")}
	for _, s := range shims {
		before[s] = inCgroup(t, s, "blkio")
	}
	pull := func(ref string) time.Duration {
		t0 := time.Now()
		if _, err := n.ImageService().PullImage(ctxT(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
			t.Fatalf("PullImage %s: %v", ref, err)
		}
		return time.Since(t0)
	}
	unthrottled := pull(fast)

	const bps = 4 << 20
	lim := DiskLimits{ReadBPS: bps, WriteBPS: bps, ReadIOPS: 1000, WriteIOPS: 1000}
	d, err := n.SlowDisk(t, lim)
	var nb *NoBlockDeviceError
	if errors.As(err, &nb) {
		Need(t, "a block device under the node directory", err)
	}
	if err != nil {
		t.Fatalf("SlowDisk: %v", err)
	}
	if _, err := n.SlowDisk(t, lim); !errors.Is(err, ErrFaultActive) {
		t.Errorf("second SlowDisk: %v, want ErrFaultActive", err)
	}
	cg := d.Cgroup()
	if want := filepath.Join(cgroupFS, "blkio", cgroupName(os.Getpid(), n.Dir)); cg != want {
		t.Errorf("Cgroup = %s, want %s", cg, want)
	}
	devs := d.Devices()
	if len(devs) == 0 {
		t.Fatal("no devices throttled")
	}
	for _, f := range lim.throttleFiles() {
		got := readTrim(t, filepath.Join(cg, f.file))
		for _, dev := range devs {
			if want := fmt.Sprintf("%s %d", dev, f.value); !strings.Contains(got, want) {
				t.Errorf("%s = %q, want a line %q", f.file, got, want)
			}
		}
	}
	if got, want := d.PIDs(), append([]int{pid}, shims...); !slices.Equal(got, want) {
		t.Errorf("PIDs = %v, want containerd and its shims %v", got, want)
	}
	procs, _ := readIDs(filepath.Join(cg, "cgroup.procs"))
	for p := range before {
		if !slices.Contains(procs, p) {
			t.Errorf("process %d not in %s/cgroup.procs %v", p, cg, procs)
		}
		allThreadsIn(t, cg, p)
	}
	throttled := pull(slow)
	t.Logf("pull of a %d MiB image: %v unthrottled, %v at %d MiB/s read and write (devices %v; cgroup v1 "+
		"charges fsync'd and direct writes, not the flusher's writeback)", size>>20, unthrottled.Round(time.Millisecond),
		throttled.Round(time.Millisecond), bps>>20, devs)

	// A restarted containerd stays throttled.
	n.RestartContainerd(t)
	newPID := n.ContainerdPID()
	if got := inCgroup(t, newPID, "blkio"); got != "/"+filepath.Base(cg) {
		t.Errorf("restarted containerd's blkio cgroup = %s, want /%s", got, filepath.Base(cg))
	}

	if err := d.Undo(); err != nil {
		t.Fatalf("Undo: %v", err)
	}
	mustNotExist(t, cg)
	for p, want := range before {
		if !processAlive(p) {
			continue // the old containerd
		}
		if got := inCgroup(t, p, "blkio"); got != want {
			t.Errorf("process %d's blkio cgroup after Undo = %s, want %s", p, got, want)
		}
	}
	if got := inCgroup(t, newPID, "blkio"); got != before[pid] {
		t.Errorf("restarted containerd's blkio cgroup after Undo = %s, want %s", got, before[pid])
	}
	if err := d.Undo(); err != nil {
		t.Errorf("second Undo: %v", err)
	}
}

// TestRealNodeSlowDiskCleanup runs the cleanup SlowDisk registers.
func TestRealNodeSlowDiskCleanup(t *testing.T) {
	n := Start(t)
	tb := &iterationTB{TB: t}
	d, err := n.SlowDisk(tb, DiskLimits{WriteBPS: 1 << 20})
	var nb *NoBlockDeviceError
	if errors.As(err, &nb) {
		Need(t, "a block device under the node directory", err)
	}
	if err != nil {
		t.Fatalf("SlowDisk: %v", err)
	}
	if len(tb.cleanups) != 1 {
		t.Fatalf("SlowDisk registered %d cleanups, want 1", len(tb.cleanups))
	}
	tb.runCleanups()
	mustNotExist(t, d.Cgroup())
	if _, err := n.SlowDisk(t, DiskLimits{}); err != nil {
		t.Errorf("SlowDisk after the cleanup: %v", err)
	}
}

func TestFaultMisuse(t *testing.T) {
	var nilNode *Node
	var nilT *testing.T
	for _, tc := range []struct {
		name, method, arg string
		call              func() error
	}{
		{"nil node freeze", "FreezeContainerd", "Node", func() error { _, err := nilNode.FreezeContainerd(t); return err }},
		{"zero node freeze", "FreezeFor", "Node", func() error { _, err := (&Node{}).FreezeFor(t, time.Second); return err }},
		{"zero node disk", "SlowDisk", "Node", func() error { _, err := (&Node{}).SlowDisk(t, DiskLimits{}); return err }},
		{"negative d", "FreezeFor", "d", func() error { _, err := nilNode.FreezeFor(t, -time.Second); return err }},
		{"zero d", "FreezeFor", "d", func() error { _, err := nilNode.FreezeFor(t, 0); return err }},
		{"negative limit", "SlowDisk", "l.WriteIOPS", func() error { _, err := nilNode.SlowDisk(t, DiskLimits{WriteIOPS: -1}); return err }},
		{"nil t", "FreezeContainerd", "t", func() error {
			_, err := (&Node{Dir: "/x", bins: binaries{containerd: "/c"}}).FreezeContainerd(nilT)
			return err
		}},
		{"nil TB", "SlowDisk", "t", func() error {
			_, err := (&Node{Dir: "/x", bins: binaries{containerd: "/c"}}).SlowDisk(nil, DiskLimits{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ae *ArgError
			if !errors.As(err, &ae) || ae.Method != tc.method || ae.Arg != tc.arg {
				t.Fatalf("err = %v, want *ArgError{%s, %s}", err, tc.method, tc.arg)
			}
			if !strings.HasPrefix(err.Error(), "testnode: "+tc.method+": "+tc.arg+" ") {
				t.Errorf("message %q", err)
			}
		})
	}

	var f Freeze
	if err := f.Thaw(); err != nil || f.Method() != "" || f.Fallback() != nil || f.PID() != 0 || f.Cgroup() != "" {
		t.Errorf("zero Freeze: Thaw %v, Method %q, Fallback %v, PID %d, Cgroup %q", err, f.Method(), f.Fallback(), f.PID(), f.Cgroup())
	}
	select {
	case <-f.Done():
	default:
		t.Error("zero Freeze: Done not closed")
	}
	var d DiskThrottle
	if err := d.Undo(); err != nil || d.Cgroup() != "" || d.Devices() != nil || d.PIDs() != nil {
		t.Errorf("zero DiskThrottle: Undo %v, Cgroup %q, Devices %v, PIDs %v", err, d.Cgroup(), d.Devices(), d.PIDs())
	}
}

func TestBlockDevice(t *testing.T) {
	var st unix.Stat_t
	if err := unix.Stat("/dev/shm", &st); err != nil || unix.Major(st.Dev) != 0 {
		t.Skipf("/dev/shm is not on an anonymous device here (%v)", err)
	}
	_, err := blockDevice("/dev/shm", "/sys/dev/block")
	var nb *NoBlockDeviceError
	if !errors.As(err, &nb) || nb.Dir != "/dev/shm" || nb.FSType != "tmpfs" || !strings.HasPrefix(nb.Device, "0:") {
		t.Errorf("blockDevice(/dev/shm) = %v (%+v), want a *NoBlockDeviceError on tmpfs", err, nb)
	}

	// A fake /sys: 8:0 is a disk, 8:1 its partition, 9:0 missing.
	sys := t.TempDir()
	disk := filepath.Join(sys, "devices", "sda")
	for _, f := range []struct{ path, content string }{
		{filepath.Join(disk, "dev"), "8:0\n"},
		{filepath.Join(disk, "sda1", "dev"), "8:1\n"},
		{filepath.Join(disk, "sda1", "partition"), "1\n"},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	blk := filepath.Join(sys, "dev", "block")
	if err := os.MkdirAll(blk, 0o755); err != nil {
		t.Fatal(err)
	}
	for dev, target := range map[string]string{"8:0": "../../devices/sda", "8:1": "../../devices/sda/sda1"} {
		if err := os.Symlink(target, filepath.Join(blk, dev)); err != nil {
			t.Fatal(err)
		}
	}
	for dev, want := range map[string]string{"8:0": "8:0", "8:1": "8:0"} {
		if got, err := wholeDisk(dev, blk, "/d"); err != nil || got != want {
			t.Errorf("wholeDisk(%s) = %q, %v; want %s", dev, got, err, want)
		}
	}
	if _, err := wholeDisk("9:0", blk, "/d"); !errors.As(err, &nb) || nb.Device != "9:0" {
		t.Errorf("wholeDisk(9:0) = %v, want a *NoBlockDeviceError", err)
	}
}

func TestCgroupName(t *testing.T) {
	name := cgroupName(42, "/tmp/spnode-123")
	if name != "syncpod-42-spnode-123" {
		t.Fatalf("cgroupName = %s", name)
	}
	if pid, ok := cgroupOwner(name); !ok || pid != 42 {
		t.Errorf("cgroupOwner(%s) = %d, %v", name, pid, ok)
	}
	for _, bad := range []string{"k8s.io", "syncpod-x-spnode-1", "syncpod-42-other", "syncpod-0-spnode-1"} {
		if _, ok := cgroupOwner(bad); ok {
			t.Errorf("cgroupOwner(%s) accepted", bad)
		}
	}
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestRealNodeReapsOrphanFreezerCgroup leaves a frozen process in a
// cgroup named for a dead test process and no node directory, and checks
// that the stale cleanup thaws it and removes the cgroup.
func TestRealNodeReapsOrphanFreezerCgroup(t *testing.T) {
	root := filepath.Join(cgroupFS, "freezer")
	_, err := os.Stat(filepath.Join(root, "cgroup.procs"))
	Need(t, "the cgroup v1 freezer", err)
	dir := filepath.Join(root, cgroupName(deadPID(t), "/tmp/"+nodeDirPattern+"orphan"+strconv.Itoa(os.Getpid())))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeCgroup(dir, true, func(int) string { return root }) })
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	if err := moveProcess(dir, sleeper.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := writeCgroup(filepath.Join(dir, "freezer.state"), "FROZEN"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); readTrim(t, filepath.Join(dir, "freezer.state")) != "FROZEN"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("sleep not frozen")
		}
	}

	did := reapOrphanCgroups()
	t.Logf("reaped: %v", did)
	mustNotExist(t, dir)
	if got := inCgroup(t, sleeper.Process.Pid, "freezer"); got != "/" {
		t.Errorf("orphan's process is in freezer cgroup %s, want /", got)
	}
	// Thawed: SIGKILL takes effect.
	_ = sleeper.Process.Signal(syscall.SIGKILL)
	if err := sleeper.Wait(); err == nil {
		t.Error("sleep exited 0 after SIGKILL")
	}
}

// TestRealNodeReapsDeadNodeFreezeAndSlowDisk starts a node in a child test process
// that freezes containerd (and slows its disk) and exits without its
// cleanups, and checks that the stale cleanup thaws and removes it all.
func TestRealNodeReapsDeadNodeFreezeAndSlowDisk(t *testing.T) {
	if os.Getenv("TESTNODE_DIE_FROZEN") != "" {
		return // the child's work is in TestHelperDieFrozen
	}
	n := Start(t)
	for _, method := range []string{"cgroup", "signal"} {
		t.Run(method, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDieFrozen$", "-test.v")
			cmd.Env = append(os.Environ(), "TESTNODE_DIE_FROZEN="+method)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var dir string
			var pid, owner int
			for _, line := range strings.Split(string(out), "\n") {
				if _, rest, ok := strings.Cut(line, "FROZEN "); ok {
					fmt.Sscanf(rest, "%s %d %d", &dir, &pid, &owner)
				}
			}
			if dir == "" || pid == 0 {
				t.Fatalf("child printed no node:\n%s", out)
			}
			freezer := filepath.Join(cgroupFS, "freezer", cgroupName(owner, dir))
			blkio := filepath.Join(cgroupFS, "blkio", cgroupName(owner, dir))
			switch method {
			case "cgroup":
				if s := readTrim(t, filepath.Join(freezer, "freezer.state")); s != "FROZEN" {
					t.Fatalf("child's containerd: freezer.state %s", s)
				}
				if _, err := os.Stat(blkio); err != nil {
					t.Fatalf("child left no blkio cgroup: %v", err)
				}
			case "signal":
				// containerd leads its own process group, orphaned when the
				// child exited: the kernel sent it SIGHUP and SIGCONT, so a
				// SIGSTOP freeze does not outlive its test binary.
				if processAlive(pid) && procState(pid) == 'T' {
					t.Errorf("child's containerd %d still stopped after the child died", pid)
				}
			}
			if !OwnerGone(dir) {
				t.Fatalf("owner of %s not seen as gone", dir)
			}
			did := reapNodeDir(dir, n.bins.runc)
			t.Logf("reaped: %s", did)
			if want := "thawed and removed cgroup " + freezer; method == "cgroup" && !strings.Contains(did, want) {
				t.Errorf("the cleanup did not say %q", want)
			}
			mustNotExist(t, freezer)
			mustNotExist(t, blkio)
			socket := filepath.Join(dir, "containerd.sock")
			if l := leftovers(socket, dir, pid, "127.0.0.1:1"); len(l) > 0 {
				t.Errorf("after reaping: %s", strings.Join(l, "; "))
			}
		})
	}
}

// TestHelperDieFrozen runs only in the child of
// TestRealNodeReapsDeadNodeFreezeAndSlowDisk.
func TestHelperDieFrozen(t *testing.T) {
	method := os.Getenv("TESTNODE_DIE_FROZEN")
	if method == "" {
		t.Skip("helper for TestRealNodeReapsDeadNodeFreezeAndSlowDisk")
	}
	n := Start(t)
	img := n.PushImage(t, "syncpod/workload")
	runPod(t, n, "orphan", img, "pause")
	if method == "cgroup" {
		if _, err := n.SlowDisk(t, DiskLimits{WriteBPS: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	} else {
		n.faults.freezerRoot = n.path("no-freezer")
	}
	f, err := n.FreezeContainerd(t)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("FROZEN %s %d %d (%s)\n", n.Dir, f.PID(), os.Getpid(), f.Method())
	os.Exit(0) // no cleanups, like a test binary killed by -timeout
}

// TestRealNodeReapsStoppedContainerd checks that the stale cleanup
// continues a process a dead node recorded as stopped, when its command
// line names that node's config (a stand-in for containerd).
func TestRealNodeReapsStoppedContainerd(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stand := exec.Command("tail", "-f", cfg)
	if err := stand.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stand.Process.Kill(); _ = stand.Wait() })
	pid := stand.Process.Pid
	if err := os.WriteFile(filepath.Join(dir, stoppedFile), []byte(strconv.Itoa(pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); procState(pid) != 'T'; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("tail %d not stopped by SIGSTOP", pid)
		}
	}
	did := reapFaultCgroups(dir)
	if want := fmt.Sprintf("sent SIGCONT to stopped containerd %d", pid); !slices.Contains(did, want) {
		t.Errorf("reapFaultCgroups = %v, want %q", did, want)
	}
	if procState(pid) == 'T' {
		t.Errorf("tail %d still stopped after the cleanup", pid)
	}
}
