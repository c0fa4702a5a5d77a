package procstat_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/syncpod/syncpod/internal/procstat"
)

// The test process's own CPU time grows with work and its RSS is at least
// the memory it holds.
func TestOwnProcess(t *testing.T) {
	pid := os.Getpid()
	before, err := procstat.CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	for after := before; after == before; {
		x := 0
		for i := range 20_000_000 {
			x += i
		}
		_ = x
		if after, err = procstat.CPU(pid); err != nil {
			t.Fatal(err)
		}
	}
	held := make([]byte, 64<<20)
	for i := range held {
		held[i] = 1
	}
	rss, err := procstat.RSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	if rss < int64(len(held)) {
		t.Fatalf("RSS %d bytes while holding %d", rss, len(held))
	}
	_ = held[len(held)-1]
}

// A child's CPU time counts in its parent's CPUWithChildren once the child
// has been waited for, and never in CPU.
func TestChildrenCounted(t *testing.T) {
	pid := os.Getpid()
	own := func() (time.Duration, time.Duration) {
		cpu, err := procstat.CPU(pid)
		if err != nil {
			t.Fatal(err)
		}
		all, err := procstat.CPUWithChildren(pid)
		if err != nil {
			t.Fatal(err)
		}
		return cpu, all - cpu
	}
	_, childrenBefore := own()
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	spent := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	_, childrenAfter := own()
	// Both are counted in clock ticks: allow one either way.
	if got := childrenAfter - childrenBefore; got < spent-2*time.Second/procstat.ClockTicks || spent < time.Second/procstat.ClockTicks {
		t.Fatalf("children's CPU grew by %v for a child that spent %v", got, spent)
	}
}

func TestNoSuchProcess(t *testing.T) {
	if _, err := procstat.CPU(-1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CPU(-1) = %v, want ErrNotExist", err)
	}
	if _, err := procstat.CPUWithChildren(-1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CPUWithChildren(-1) = %v, want ErrNotExist", err)
	}
	if _, err := procstat.RSS(-1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("RSS(-1) = %v, want ErrNotExist", err)
	}
}

func Example() {
	rss, err := procstat.RSS(os.Getpid())
	fmt.Println(err == nil && rss > 0)
	// Output: true
}
