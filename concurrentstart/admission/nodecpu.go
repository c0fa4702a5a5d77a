package admission

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// procStat is where NodeCPU reads; a variable for tests.
var procStat = "/proc/stat"

// userHZ is the unit of /proc/stat's counters: USER_HZ is 100 on every
// Linux architecture that Go supports.
const userHZ = 100

// NodeCPU returns a CPUReader of the node's CPU time from /proc/stat
// (Linux): busy is every state but idle and iowait, steal included, since
// stolen time was not the node's to use. It fails where /proc/stat cannot
// be read or parsed, so a caller knows at once that the signal is missing.
func NodeCPU() (CPUReader, error) {
	r := func() (time.Duration, time.Duration, error) { return readProcStat(procStat) }
	if _, _, err := r(); err != nil {
		return nil, err
	}
	return r, nil
}

// readProcStat reads the first ("cpu") line of a /proc/stat file.
func readProcStat(path string) (busy, total time.Duration, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, fmt.Errorf("admission: node CPU: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	if !sc.Scan() {
		return 0, 0, fmt.Errorf("admission: node CPU: %s is empty", path)
	}
	fields := bytes.Fields(sc.Bytes())
	// cpu user nice system idle iowait irq softirq steal [guest guest_nice]:
	// guest time is already counted in user and nice.
	if len(fields) < 9 || string(fields[0]) != "cpu" {
		return 0, 0, fmt.Errorf("admission: node CPU: %s: unexpected first line %q", path, sc.Text())
	}
	var ticks [8]uint64
	for i := range ticks {
		v, err := strconv.ParseUint(string(fields[i+1]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("admission: node CPU: %s: field %d: %w", path, i+1, err)
		}
		ticks[i] = v
	}
	var all uint64
	for _, v := range ticks {
		all += v
	}
	idle := ticks[3] + ticks[4]
	tick := time.Second / userHZ
	return time.Duration(all-idle) * tick, time.Duration(all) * tick, nil
}
