package procstat

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux this runs on.
const ClockTicks = 100

// CPU returns the user plus system CPU time pid has used, with the
// resolution of a clock tick (10 ms).
func CPU(pid int) (time.Duration, error) {
	t, err := times(pid)
	if err != nil {
		return 0, err
	}
	return t[0] + t[1], nil
}

// CPUWithChildren is CPU plus the CPU time of pid's children that have
// exited and been waited for: for a containerd shim, the runc runs it
// made and the container processes it reaped.
func CPUWithChildren(pid int) (time.Duration, error) {
	t, err := times(pid)
	if err != nil {
		return 0, err
	}
	return t[0] + t[1] + t[2] + t[3], nil
}

// times reads utime, stime, cutime and cstime from /proc/PID/stat.
func times(pid int) ([4]time.Duration, error) {
	var out [4]time.Duration
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return out, fmt.Errorf("procstat: %w", err)
	}
	// The command name (field 2) may hold spaces: count from its ")".
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 15 {
		return out, fmt.Errorf("procstat: /proc/%d/stat: %q: too few fields", pid, s)
	}
	for i := range out {
		v, err := strconv.ParseInt(fields[11+i], 10, 64)
		if err != nil {
			return out, fmt.Errorf("procstat: /proc/%d/stat: %q: bad times", pid, s)
		}
		out[i] = time.Duration(v) * time.Second / ClockTicks
	}
	return out, nil
}

// RSS returns pid's resident set size (VmRSS) in bytes.
func RSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("procstat: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("procstat: /proc/%d/status: VmRSS %q", pid, v)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("procstat: /proc/%d/status: no VmRSS", pid)
}
