package admission

import (
	"fmt"

	"github.com/syncpod/syncpod/internal/procstat"
)

// NodeCPU returns a CPUReader of the node's CPU time from /proc/stat
// (Linux): busy is every state but idle and iowait, steal included, since
// stolen time was not the node's to use. It fails where /proc/stat cannot
// be read or parsed, so a caller knows at once that the signal is missing.
func NodeCPU() (CPUReader, error) {
	if _, _, err := procstat.Node(); err != nil {
		return nil, fmt.Errorf("admission: node CPU: %w", err)
	}
	return procstat.Node, nil
}
