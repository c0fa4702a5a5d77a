package testnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FreezeMethod says how a Freeze stopped containerd.
type FreezeMethod string

const (
	// FreezeCgroup: containerd's daemon was moved into a cgroup v1 freezer
	// cgroup of its own and frozen (freezer.state FROZEN).
	FreezeCgroup FreezeMethod = "cgroup-freezer"
	// FreezeSIGSTOP: the freezer could not be used (see Freeze.Fallback),
	// so the daemon was stopped with SIGSTOP and is continued with SIGCONT.
	FreezeSIGSTOP FreezeMethod = "SIGSTOP"
)

// stoppedFile records, in the node directory, the PID of a containerd
// stopped with SIGSTOP, so that a later run can continue it.
const stoppedFile = "containerd.stopped"

// freezeTimeout bounds the wait for the kernel to report the daemon
// frozen or stopped.
const freezeTimeout = 10 * time.Second

// Freeze is one freeze of a node's containerd, made by
// Node.FreezeContainerd or Node.FreezeFor; Thaw ends it. Use those
// methods: the zero Freeze is a freeze that has already ended.
type Freeze struct {
	n        *Node
	pid      int
	method   FreezeMethod
	fallback error
	cgroup   string // the freezer cgroup (FreezeCgroup)
	orig     string // containerd's freezer cgroup before, absolute
	done     chan struct{}

	mu    sync.Mutex
	timer *time.Timer

	once sync.Once
	err  error
}

// FreezeContainerd freezes the node's containerd daemon until Thaw: every
// CRI call hangs (and hits its deadline) while containers and their shims
// keep running, as when containerd is stuck. Only the daemon started by
// this node is frozen, by its PID: all its threads go into a cgroup v1
// freezer cgroup of their own, named after the node, and the call returns
// once freezer.state reads FROZEN. Where the freezer cannot be used, the
// daemon is stopped with SIGSTOP instead (Method and Fallback say so).
//
// The freeze always ends: Thaw, a t.Cleanup registered before freezing,
// KillContainerd and RestartContainerd (which signal first and then thaw,
// so the frozen daemon gets the signal as it wakes), the node's teardown,
// and, after a test binary died, the stale-node cleanup of a later run.
// (A SIGSTOPped daemon does not even wait for that: it leads its own
// process group, and when the test binary dies the kernel sends the
// orphaned group SIGHUP and SIGCONT.)
//
// Errors: an *ArgError for a nil t or a Node not made by Start; a
// *FaultError wrapping ErrContainerdDown or ErrFaultActive (one freeze per
// node at a time), or the failure of both methods.
func (n *Node) FreezeContainerd(t testing.TB) (*Freeze, error) {
	return n.freeze("FreezeContainerd", t, 0)
}

// FreezeFor is FreezeContainerd thawed by a timer after d; it returns once
// containerd is frozen. Done is closed at the thaw. d must be positive: a
// negative or zero d is an *ArgError.
func (n *Node) FreezeFor(t testing.TB, d time.Duration) (*Freeze, error) {
	if d < 0 {
		return nil, &ArgError{Method: "FreezeFor", Arg: "d", Reason: fmt.Sprintf("%v is negative", d)}
	}
	if d == 0 {
		return nil, &ArgError{Method: "FreezeFor", Arg: "d", Reason: "is zero: a freeze needs a positive duration"}
	}
	return n.freeze("FreezeFor", t, d)
}

func (n *Node) freeze(method string, t testing.TB, d time.Duration) (*Freeze, error) {
	if err := n.checkNode(method, t); err != nil {
		return nil, err
	}
	t.Helper()
	n.mu.Lock()
	if n.proc == nil {
		n.mu.Unlock()
		return nil, &FaultError{Fault: "freeze", Op: "find containerd", Err: ErrContainerdDown}
	}
	if n.faults.freeze != nil {
		n.mu.Unlock()
		return nil, &FaultError{Fault: "freeze", Op: "start", Err: ErrFaultActive}
	}
	f := &Freeze{n: n, pid: n.proc.cmd.Process.Pid, done: make(chan struct{})}
	n.faults.freeze = f
	root := n.faults.root("freezer")
	n.mu.Unlock()
	t.Cleanup(func() {
		if err := f.Thaw(); err != nil {
			t.Errorf("%v", err)
		}
	})

	f.method = FreezeCgroup
	if err := f.freezeCgroup(root); err != nil {
		f.method, f.fallback = FreezeSIGSTOP, err
		if serr := f.stop(); serr != nil {
			f.method = ""
			_ = f.Thaw()
			return nil, &FaultError{Fault: "freeze", Op: "freeze containerd",
				Err: fmt.Errorf("cgroup freezer: %v; SIGSTOP: %w", err, serr)}
		}
	}
	if d > 0 {
		f.mu.Lock()
		f.timer = time.AfterFunc(d, func() { _ = f.Thaw() })
		f.mu.Unlock()
	}
	return f, nil
}

// freezeCgroup moves the daemon into the node's freezer cgroup and
// freezes it; on failure it leaves the daemon where it was.
func (f *Freeze) freezeCgroup(root string) error {
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		return fmt.Errorf("no cgroup v1 freezer at %s: %w", root, err)
	}
	orig, err := procCgroup(f.pid, "freezer")
	if err != nil {
		return err
	}
	f.orig = filepath.Join(root, orig)
	dir := filepath.Join(root, cgroupName(os.Getpid(), f.n.Dir))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("create freezer cgroup: %w", err)
	}
	f.cgroup = dir
	fail := func(err error) error {
		if rerr := f.removeCgroup(); rerr != nil {
			err = errors.Join(err, rerr)
		}
		f.cgroup = ""
		return err
	}
	if err := moveProcess(dir, f.pid); err != nil {
		return fail(fmt.Errorf("move containerd %d: %w", f.pid, err))
	}
	state := filepath.Join(dir, "freezer.state")
	if err := writeCgroup(state, "FROZEN"); err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(freezeTimeout)
	for {
		b, err := os.ReadFile(state)
		if err != nil {
			return fail(err)
		}
		if strings.TrimSpace(string(b)) == "FROZEN" {
			return nil
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("%s still reads %s after %v", state, strings.TrimSpace(string(b)), freezeTimeout))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// removeCgroup thaws the freezer cgroup and moves the daemon back.
func (f *Freeze) removeCgroup() error {
	return removeCgroup(f.cgroup, true, func(int) string { return f.orig })
}

// stop sends SIGSTOP to the daemon and waits until it is stopped.
func (f *Freeze) stop() error {
	if err := os.WriteFile(f.n.path(stoppedFile), []byte(strconv.Itoa(f.pid)), 0o600); err != nil {
		return fmt.Errorf("record stopped containerd: %w", err)
	}
	if err := syscall.Kill(f.pid, syscall.SIGSTOP); err != nil {
		_ = os.Remove(f.n.path(stoppedFile))
		return fmt.Errorf("SIGSTOP %d: %w", f.pid, err)
	}
	deadline := time.Now().Add(freezeTimeout)
	for procState(f.pid) != 'T' {
		if time.Now().After(deadline) {
			_ = syscall.Kill(f.pid, syscall.SIGCONT)
			_ = os.Remove(f.n.path(stoppedFile))
			return fmt.Errorf("containerd %d not stopped %v after SIGSTOP", f.pid, freezeTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// procState is the state letter of /proc/PID/stat (R, S, D, T, Z, ...),
// 0 when the process is gone.
func procState(pid int) byte {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2]
	}
	return 0
}

// Thaw ends the freeze: with the cgroup freezer it writes THAWED, moves
// the daemon back to its freezer cgroup and removes the cgroup; with
// SIGSTOP it sends SIGCONT. It is idempotent (later calls return what the
// first returned) and safe to call concurrently with the FreezeFor timer.
// A daemon that exited meanwhile is not an error. Thaw of the zero Freeze
// returns nil.
func (f *Freeze) Thaw() error {
	if f == nil || f.n == nil {
		return nil
	}
	f.once.Do(func() {
		f.mu.Lock()
		if f.timer != nil {
			f.timer.Stop()
		}
		f.mu.Unlock()
		switch f.method {
		case FreezeCgroup:
			if err := f.removeCgroup(); err != nil {
				f.err = &FaultError{Fault: "freeze", Op: "thaw", Err: err}
			}
		case FreezeSIGSTOP:
			if err := syscall.Kill(f.pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
				f.err = &FaultError{Fault: "freeze", Op: "thaw", Err: fmt.Errorf("SIGCONT %d: %w", f.pid, err)}
			}
			_ = os.Remove(f.n.path(stoppedFile))
		}
		f.n.mu.Lock()
		if f.n.faults.freeze == f {
			f.n.faults.freeze = nil
		}
		f.n.mu.Unlock()
		close(f.done)
	})
	return f.err
}

// Done is closed once the freeze has ended (Thaw, the FreezeFor timer or
// a cleanup). For the zero Freeze it is a closed channel.
func (f *Freeze) Done() <-chan struct{} {
	if f == nil || f.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return f.done
}

// Method says how containerd was frozen, for a test or benchmark to print;
// "" for the zero Freeze.
func (f *Freeze) Method() FreezeMethod {
	if f == nil {
		return ""
	}
	return f.method
}

// Fallback is why the cgroup freezer was not used (Method is
// FreezeSIGSTOP), nil when it was.
func (f *Freeze) Fallback() error {
	if f == nil {
		return nil
	}
	return f.fallback
}

// PID is the containerd daemon that was frozen; 0 for the zero Freeze.
func (f *Freeze) PID() int {
	if f == nil {
		return 0
	}
	return f.pid
}

// Cgroup is the freezer cgroup containerd was moved into, "" with
// FreezeSIGSTOP.
func (f *Freeze) Cgroup() string {
	if f == nil {
		return ""
	}
	return f.cgroup
}

// endFreeze thaws an active freeze; stopContainerd calls it after
// signalling, so that the frozen daemon acts on the signal as it wakes.
func (n *Node) endFreeze() {
	n.mu.Lock()
	f := n.faults.freeze
	n.mu.Unlock()
	if f != nil {
		_ = f.Thaw() // a failure is reported by the freeze's cleanup
	}
}
