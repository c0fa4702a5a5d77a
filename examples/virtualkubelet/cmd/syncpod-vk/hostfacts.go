package main

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// hostPaths are the files readHostFacts reads, as the kubelet's cadvisor
// reads them.
var hostPaths = struct {
	meminfo, loadavg, pidMax, osrelease, osRelease, machineID, dbusMachineID, productUUID, bootID, route string
}{
	meminfo: "/proc/meminfo", loadavg: "/proc/loadavg", pidMax: "/proc/sys/kernel/pid_max",
	osrelease: "/proc/sys/kernel/osrelease", osRelease: "/etc/os-release",
	machineID: "/etc/machine-id", dbusMachineID: "/var/lib/dbus/machine-id",
	productUUID: "/sys/class/dmi/id/product_uuid", bootID: "/proc/sys/kernel/random/boot_id",
	route: "/proc/net/route",
}

// readHostFacts reads what the host reports; fsPath is the directory whose
// filesystem is the node's ephemeral storage (the pod directory, or the
// nearest directory above it that exists). What cannot be read is left
// zero. Every read is of a small proc or sys file, or a statfs.
func readHostFacts(fsPath string) hostFacts {
	h := hostFacts{CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile(hostPaths.meminfo); err == nil {
		h.MemoryTotal, h.MemoryAvailable = parseMeminfo(b)
	}
	h.PIDMax = readInt(hostPaths.pidMax)
	if b, err := os.ReadFile(hostPaths.loadavg); err == nil {
		h.PIDUsed = parseLoadavgThreads(b)
	}
	h.KernelVersion = readLine(hostPaths.osrelease)
	if b, err := os.ReadFile(hostPaths.osRelease); err == nil {
		h.OSImage = parseOSRelease(b)
	}
	if h.MachineID = readLine(hostPaths.machineID); h.MachineID == "" {
		h.MachineID = readLine(hostPaths.dbusMachineID)
	}
	h.SystemUUID = readLine(hostPaths.productUUID)
	h.BootID = readLine(hostPaths.bootID)
	if name, err := os.Hostname(); err == nil {
		h.Hostname = strings.ToLower(strings.TrimSpace(name))
	}
	if b, err := os.ReadFile(hostPaths.route); err == nil {
		if iface := parseDefaultRouteInterface(b); iface != "" {
			h.DefaultIP = interfaceIP(iface)
		}
	}
	for dir := fsPath; dir != ""; {
		if _, err := os.Stat(dir); err == nil {
			h.FSCapacity, h.FSAvailable, h.FSInodes, h.FSInodesFree = statFS(dir)
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return h
}

func readLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readInt(path string) int64 {
	v, err := strconv.ParseInt(readLine(path), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// parseMeminfo returns MemTotal and MemAvailable of /proc/meminfo, in
// bytes (0 when missing).
func parseMeminfo(b []byte) (total, available int64) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 2 && f[2] == "kB" {
			v *= 1024
		}
		switch f[0] {
		case "MemTotal:":
			total = v
		case "MemAvailable:":
			available = v
		}
	}
	return total, available
}

// parseLoadavgThreads returns the number of scheduling entities (threads)
// of /proc/loadavg's fourth field, "running/total".
func parseLoadavgThreads(b []byte) int64 {
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return 0
	}
	_, total, ok := strings.Cut(f[3], "/")
	if !ok {
		return 0
	}
	v, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// parseOSRelease returns PRETTY_NAME of an os-release file, as the
// kubelet's OS image ("Debian GNU/Linux 12 (bookworm)").
func parseOSRelease(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok && k == "PRETTY_NAME" {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

// parseDefaultRouteInterface returns the interface of the IPv4 default
// route in /proc/net/route (destination 0, mask 0), the one with the
// lowest metric; "" if there is none.
func parseDefaultRouteInterface(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	best, bestMetric := "", int64(-1)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		metric, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			continue
		}
		if bestMetric < 0 || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	return best
}

// interfaceIP returns the first global unicast IPv4 address of the
// interface, "" if it has none.
func interfaceIP(name string) string {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return ""
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}
