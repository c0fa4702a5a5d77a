package procstat

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// nodeCPU counts every state but idle and iowait as busy, in clock ticks,
// and refuses what is not a /proc/stat.
func TestNodeCPUParses(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "stat")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// user nice system idle iowait irq softirq steal guest guest_nice
	p := write("cpu  100 20 50 700 80 10 20 20 5 0\ncpu0 1 2 3 4 5 6 7 8 9 0\nintr 1\n")
	busy, total, err := nodeCPU(p)
	if err != nil {
		t.Fatal(err)
	}
	if busy != 2200*time.Millisecond || total != 10*time.Second {
		t.Fatalf("busy %v of %v, want 2.2s of 10s (guest time is in user already)", busy, total)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if _, _, err := nodeCPU(write(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, _, err := nodeCPU(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want a not-exist error", err)
	}
}
