package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Node returns the CPU time of the whole machine from /proc/stat, summed
// over its cores: busy is every state but idle and iowait (stolen time
// counts as busy: it was not the machine's to use), total every state.
func Node() (busy, total time.Duration, err error) { return nodeCPU("/proc/stat") }

// nodeCPU reads the first ("cpu") line of a /proc/stat file. It reads no
// more than that line: the file goes on with a line per core and
// interrupt counts that run to kilobytes on a large machine.
func nodeCPU(path string) (busy, total time.Duration, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("procstat: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 512).ReadSlice('\n')
	if err != nil {
		return 0, 0, fmt.Errorf("procstat: %s: first line: %w", path, err)
	}
	// cpu user nice system idle iowait irq softirq steal [guest guest_nice]:
	// guest time is already counted in user and nice.
	fields := bytes.Fields(line)
	if len(fields) < 9 || string(fields[0]) != "cpu" {
		return 0, 0, fmt.Errorf("procstat: %s: unexpected first line %q", path, line)
	}
	var all, idle uint64
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("procstat: %s: field %d of %q: %w", path, i+1, line, err)
		}
		all += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	tick := time.Second / ClockTicks
	return time.Duration(all-idle) * tick, time.Duration(all) * tick, nil
}
