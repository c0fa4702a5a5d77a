package procstat_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

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

func TestNoSuchProcess(t *testing.T) {
	if _, err := procstat.CPU(-1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CPU(-1) = %v, want ErrNotExist", err)
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
