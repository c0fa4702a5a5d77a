package provider

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// userHZ is the unit of /proc/stat's CPU times (USER_HZ, 100 on Linux).
const userHZ = 100

// procDir is where the host's CPU and memory are read.
var procDir = "/proc"

// nodeCPU remembers the node's last CPU sample, for its usage rate.
type nodeCPU struct {
	mu       sync.Mutex
	at       time.Time
	coreNano uint64
}

// nodeStats are the node's CPU and memory as the host reports them, with
// the node's name and the host's boot time as its start time.
func (p *Provider) nodeStats(now time.Time) statsv1alpha1.NodeStats {
	ns := statsv1alpha1.NodeStats{NodeName: p.cfg.nodeName}
	t := metav1.NewTime(now)
	if used, boot, ok := readProcStat(procDir); ok {
		cpu := &statsv1alpha1.CPUStats{Time: t, UsageCoreNanoSeconds: ptr(used)}
		p.nodeCPU.mu.Lock()
		if !p.nodeCPU.at.IsZero() && now.After(p.nodeCPU.at) && used >= p.nodeCPU.coreNano {
			cpu.UsageNanoCores = ptr(uint64(float64(used-p.nodeCPU.coreNano) / now.Sub(p.nodeCPU.at).Seconds()))
		}
		p.nodeCPU.at, p.nodeCPU.coreNano = now, used
		p.nodeCPU.mu.Unlock()
		ns.CPU = cpu
		ns.StartTime = metav1.NewTime(boot)
	}
	if total, avail, free, ok := readMeminfo(procDir); ok {
		ns.Memory = &statsv1alpha1.MemoryStats{Time: t, AvailableBytes: ptr(avail),
			UsageBytes: ptr(total - free), WorkingSetBytes: ptr(total - avail)}
	}
	return ns
}

// readProcStat is the CPU time the host spent busy (not idle, not waiting
// for I/O), in core-nanoseconds, and its boot time.
func readProcStat(dir string) (busyNano uint64, boot time.Time, ok bool) {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0, time.Time{}, false
	}
	var haveCPU bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 5 && f[0] == "cpu":
			var busy uint64
			for i, v := range f[1:] {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return 0, time.Time{}, false
				}
				if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are in user already
					continue
				}
				busy += n
			}
			busyNano, haveCPU = busy*(1e9/userHZ), true
		case len(f) == 2 && f[0] == "btime":
			if s, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				boot = time.Unix(s, 0)
			}
		}
	}
	return busyNano, boot, haveCPU
}

// readMeminfo is the host's total, available and free memory in bytes.
func readMeminfo(dir string) (total, avail, free uint64, ok bool) {
	b, err := os.ReadFile(dir + "/meminfo")
	if err != nil {
		return 0, 0, 0, false
	}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		n *= 1024 // kB
		switch f[0] {
		case "MemTotal:":
			total, seen = n, seen+1
		case "MemAvailable:":
			avail, seen = n, seen+1
		case "MemFree:":
			free, seen = n, seen+1
		}
	}
	return total, avail, free, seen == 3 && total >= avail && total >= free
}
