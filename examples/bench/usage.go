package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/syncpod/syncpod/internal/procstat"
)

// runUsage is the CPU time a run cost the node, read from /proc around it.
type runUsage struct {
	// Node is the node's busy core time, every process counted.
	Node time.Duration
	// Runtime is containerd's and its shims' (with the runc runs and the
	// container processes each shim reaped). A shim that exits during the
	// run (its pod removed) takes its time with it: churn undercounts.
	Runtime time.Duration
	// Orchestrator is the orchestrator's process: the kubelet, or for the
	// agent this process (the agent and the benchmark's polling of the
	// runtime's start times).
	Orchestrator time.Duration
}

// usageMeter reads a runUsage from the moment it was made.
type usageMeter struct {
	containerd, orchestrator  int
	address                   string
	node0, containerd0, orch0 time.Duration
	shims0                    map[int]time.Duration
}

// startUsage begins a runUsage of the containerd at pid containerd,
// serving at endpoint (its shims are told that address), and of the
// orchestrator's process.
func startUsage(containerd int, endpoint string, orchestrator int) (*usageMeter, error) {
	m := &usageMeter{containerd: containerd, orchestrator: orchestrator, address: strings.TrimPrefix(endpoint, "unix://")}
	var err error
	if m.node0, _, err = procstat.Node(); err != nil {
		return nil, err
	}
	if m.containerd0, err = procstat.CPU(containerd); err != nil {
		return nil, err
	}
	if m.orch0, err = procstat.CPU(orchestrator); err != nil {
		return nil, err
	}
	m.shims0 = m.shims()
	return m, nil
}

// read is the usage since startUsage.
func (m *usageMeter) read() (runUsage, error) {
	var u runUsage
	node, _, err := procstat.Node()
	if err != nil {
		return u, err
	}
	cd, err := procstat.CPU(m.containerd)
	if err != nil {
		return u, err
	}
	orch, err := procstat.CPU(m.orchestrator)
	if err != nil {
		return u, err
	}
	u.Node, u.Runtime, u.Orchestrator = node-m.node0, cd-m.containerd0, orch-m.orch0
	for pid, t := range m.shims() {
		u.Runtime += t - m.shims0[pid]
	}
	return u, nil
}

// shims is the CPU time, children included, of every containerd shim
// serving this containerd, by PID.
func (m *usageMeter) shims() map[int]time.Duration {
	out := map[int]time.Duration{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(cmd, []byte("containerd-shim")) || !shimOf(cmd, m.address) {
			continue
		}
		if t, err := procstat.CPUWithChildren(pid); err == nil {
			out[pid] = t
		}
	}
	return out
}

// shimOf reports whether the NUL-separated command line cmd is a shim's
// that was given -address addr.
func shimOf(cmd []byte, addr string) bool {
	args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-address" && args[i+1] == addr {
			return true
		}
	}
	return false
}
