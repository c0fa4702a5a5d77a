package testnode

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// SmallCloudDisk is a small network-attached cloud disk (a standard
// persistent disk of about 100 GB): 75 write and 150 read operations, 8
// and 16 MiB a second. The stalled-runtime benchmarks throttle containerd
// to it.
var SmallCloudDisk = DiskLimits{WriteIOPS: 75, ReadIOPS: 150, WriteBPS: 8 << 20, ReadBPS: 16 << 20}

// DiskLimits are the blkio throttle limits SlowDisk sets. A zero field
// means unlimited; a negative one is an *ArgError.
type DiskLimits struct {
	// ReadBPS is blkio.throttle.read_bps_device, bytes per second.
	ReadBPS int64
	// WriteBPS is blkio.throttle.write_bps_device, bytes per second.
	WriteBPS int64
	// ReadIOPS is blkio.throttle.read_iops_device, reads per second.
	ReadIOPS int64
	// WriteIOPS is blkio.throttle.write_iops_device, writes per second.
	WriteIOPS int64
}

// throttleFiles pairs each limit with its blkio control file.
func (l DiskLimits) throttleFiles() []struct {
	field, file string
	value       int64
} {
	return []struct {
		field, file string
		value       int64
	}{
		{"ReadBPS", "blkio.throttle.read_bps_device", l.ReadBPS},
		{"WriteBPS", "blkio.throttle.write_bps_device", l.WriteBPS},
		{"ReadIOPS", "blkio.throttle.read_iops_device", l.ReadIOPS},
		{"WriteIOPS", "blkio.throttle.write_iops_device", l.WriteIOPS},
	}
}

// NoBlockDeviceError says that a directory SlowDisk would throttle is on a
// file system with no block device of its own (tmpfs, overlay, a btrfs
// subvolume: st_dev has major number 0) or on a device the kernel does not
// list in /sys/dev/block, so there is nothing blkio can throttle.
type NoBlockDeviceError struct {
	// Dir is the directory.
	Dir string
	// Device is its st_dev, "MAJ:MIN".
	Device string
	// FSType is the file system type from /proc/self/mountinfo, "" if not
	// found.
	FSType string
}

// Error says which directory is on which file system.
func (e *NoBlockDeviceError) Error() string {
	fs := e.FSType
	if fs == "" {
		fs = "an unknown file system"
	}
	return fmt.Sprintf("testnode: %s is on %s (device %s), which has no block device to throttle", e.Dir, fs, e.Device)
}

// DiskThrottle is one SlowDisk of a node; Undo ends it. Use SlowDisk: the
// zero DiskThrottle is one that has already been undone.
type DiskThrottle struct {
	n       *Node
	cgroup  string
	devices []string
	root    string
	orig    string         // containerd's blkio cgroup before, absolute
	moved   map[int]string // PID -> its blkio cgroup before, absolute
	pids    []int          // what SlowDisk moved: containerd, then its shims

	mu sync.Mutex // guards moved and pids against join

	once sync.Once
	err  error
}

// SlowDisk throttles the block I/O of the node's containerd daemon and of
// the shims serving it with the cgroup v1 blkio controller: they are moved
// into a blkio cgroup of their own, named after the node, whose
// blkio.throttle.* files hold l for the block device under the node's root
// and state directories (the whole disk when they are on a partition).
// Shims and runc processes containerd starts later are its children and
// land in the cgroup too; so does a containerd started by RestartContainerd.
// Containers are not throttled: runc moves them into their own cgroups.
//
// What cgroup v1 throttles: reads, direct I/O, and writes the throttled
// process itself flushes (fsync, which containerd's content store does as
// it commits a blob). Buffered writes that the kernel's flusher threads
// write back later are not charged to the cgroup (v1 has no writeback
// attribution), so a pull slows down less than the limit alone predicts.
//
// The throttle always ends: Undo, a t.Cleanup registered before the move,
// the node's teardown, and the stale-node cleanup of a later run. Errors:
// an *ArgError (nil t, negative limit, Node not made by Start); a
// *NoBlockDeviceError when Node.Dir has no block device (tmpfs); a
// *FaultError wrapping ErrContainerdDown, ErrFaultActive or a cgroup
// write's failure.
func (n *Node) SlowDisk(t testing.TB, l DiskLimits) (*DiskThrottle, error) {
	for _, f := range l.throttleFiles() {
		if f.value < 0 {
			return nil, &ArgError{Method: "SlowDisk", Arg: "l." + f.field, Reason: fmt.Sprintf("%d is negative", f.value)}
		}
	}
	if err := n.checkNode("SlowDisk", t); err != nil {
		return nil, err
	}
	t.Helper()
	var devices []string
	for _, dir := range []string{n.path("root"), n.path("state")} {
		dev, err := blockDevice(dir, "/sys/dev/block")
		if err != nil {
			return nil, err
		}
		if !slices.Contains(devices, dev) {
			devices = append(devices, dev)
		}
	}
	n.mu.Lock()
	if n.proc == nil {
		n.mu.Unlock()
		return nil, &FaultError{Fault: "slow disk", Op: "find containerd", Err: ErrContainerdDown}
	}
	if n.faults.disk != nil {
		n.mu.Unlock()
		return nil, &FaultError{Fault: "slow disk", Op: "start", Err: ErrFaultActive}
	}
	pid := n.proc.cmd.Process.Pid
	root := n.faults.root("blkio")
	d := &DiskThrottle{n: n, devices: devices, root: root, moved: map[int]string{}}
	n.faults.disk = d
	n.mu.Unlock()
	t.Cleanup(func() {
		if err := d.Undo(); err != nil {
			t.Errorf("%v", err)
		}
	})
	if err := d.apply(pid, l); err != nil {
		_ = d.Undo()
		return nil, err
	}
	return d, nil
}

func (d *DiskThrottle) apply(pid int, l DiskLimits) error {
	fail := func(op string, err error) error { return &FaultError{Fault: "slow disk", Op: op, Err: err} }
	if _, err := os.Stat(filepath.Join(d.root, "blkio.throttle.write_bps_device")); err != nil {
		return fail("find blkio", fmt.Errorf("no cgroup v1 blkio throttling at %s: %w", d.root, err))
	}
	orig, err := procCgroup(pid, "blkio")
	if err != nil {
		return fail("find containerd's cgroup", err)
	}
	d.orig = filepath.Join(d.root, orig)
	dir := filepath.Join(d.root, cgroupName(os.Getpid(), d.n.Dir))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fail("create cgroup", err)
	}
	d.cgroup = dir
	for _, f := range l.throttleFiles() {
		if f.value == 0 {
			continue
		}
		for _, dev := range d.devices {
			if err := writeCgroup(filepath.Join(dir, f.file), dev+" "+strconv.FormatInt(f.value, 10)); err != nil {
				return fail("set limit", err)
			}
		}
	}
	if err := d.join(pid); err != nil {
		return fail("move containerd", err)
	}
	for _, shim := range shimPIDs(d.n.socket) {
		if err := d.join(shim); err != nil && !gone(err) {
			return fail("move shim", err)
		}
	}
	return nil
}

// join moves pid, every thread, into the cgroup, remembering where it was.
func (d *DiskThrottle) join(pid int) error {
	from, err := procCgroup(pid, "blkio")
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := moveProcess(d.cgroup, pid); err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	if _, ok := d.moved[pid]; !ok {
		d.moved[pid] = filepath.Join(d.root, from)
		d.pids = append(d.pids, pid)
	}
	return nil
}

// Undo ends the throttle: every process in the cgroup goes back to the
// blkio cgroup it came from (those that joined later, to containerd's),
// and the cgroup is removed. Idempotent: later calls return what the first
// returned. Undo of the zero DiskThrottle returns nil.
func (d *DiskThrottle) Undo() error {
	if d == nil || d.n == nil {
		return nil
	}
	d.once.Do(func() {
		if d.cgroup != "" {
			d.mu.Lock()
			err := removeCgroup(d.cgroup, false, func(pid int) string {
				if to, ok := d.moved[pid]; ok {
					return to
				}
				return d.orig
			})
			d.mu.Unlock()
			if err != nil {
				d.err = &FaultError{Fault: "slow disk", Op: "undo", Err: err}
			}
		}
		d.n.mu.Lock()
		if d.n.faults.disk == d {
			d.n.faults.disk = nil
		}
		d.n.mu.Unlock()
	})
	return d.err
}

// Devices are the throttled block devices, "MAJ:MIN".
func (d *DiskThrottle) Devices() []string {
	if d == nil {
		return nil
	}
	return slices.Clone(d.devices)
}

// Cgroup is the blkio cgroup the processes were moved into.
func (d *DiskThrottle) Cgroup() string {
	if d == nil {
		return ""
	}
	return d.cgroup
}

// PIDs are the processes SlowDisk and a restart moved into the cgroup:
// containerd first, then its shims.
func (d *DiskThrottle) PIDs() []int {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.pids)
}

// joinDisk puts a freshly started containerd into an active throttle.
func (n *Node) joinDisk(pid int) error {
	n.mu.Lock()
	d := n.faults.disk
	n.mu.Unlock()
	if d == nil || d.cgroup == "" {
		return nil
	}
	if err := d.join(pid); err != nil {
		return &FaultError{Fault: "slow disk", Op: "move restarted containerd", Err: err}
	}
	return nil
}

// blockDevice returns the whole-disk block device ("MAJ:MIN") holding dir,
// looked up in sysDevBlock (/sys/dev/block): st_dev of dir, its disk if
// that is a partition, or a *NoBlockDeviceError.
func blockDevice(dir, sysDevBlock string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", &FaultError{Fault: "slow disk", Op: "stat", Err: err}
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	if unix.Major(st.Dev) == 0 {
		return "", &NoBlockDeviceError{Dir: dir, Device: dev, FSType: fsType(dev)}
	}
	return wholeDisk(dev, sysDevBlock, dir)
}

// wholeDisk maps a block device to its disk: /sys/dev/block/MAJ:MIN is a
// link to the device's sysfs directory; a partition has a "partition" file
// and sits inside its disk's directory, whose "dev" file names the disk.
func wholeDisk(dev, sysDevBlock, dir string) (string, error) {
	sys, err := filepath.EvalSymlinks(filepath.Join(sysDevBlock, dev))
	if err != nil {
		return "", &NoBlockDeviceError{Dir: dir, Device: dev, FSType: fsType(dev)}
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); errors.Is(err, os.ErrNotExist) {
		return dev, nil
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(sys), "dev"))
	if err != nil {
		return "", &FaultError{Fault: "slow disk", Op: "find the disk of partition " + dev, Err: err}
	}
	return strings.TrimSpace(string(b)), nil
}

// fsType finds the type of the file system whose device is dev in
// /proc/self/mountinfo ("" if none matches).
func fsType(dev string) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[2] != dev {
			continue
		}
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) {
				return fields[i+1]
			}
		}
	}
	return ""
}
