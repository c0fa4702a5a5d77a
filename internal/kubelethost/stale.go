package kubelethost

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var staleOnce sync.Once

// reapStaleOnce removes, once per process, the kubelet directories of test
// binaries that died without running their cleanups, and kills a kubelet
// still running from one. Only what such a directory names is touched: the
// PID it recorded, and only if that process still runs with this
// directory's config.
func reapStaleOnce() {
	staleOnce.Do(reapStale)
}

func reapStale() {
	dirs, _ := filepath.Glob(filepath.Join("/tmp", dirPattern+"*"))
	for _, dir := range dirs {
		owner, ok := readPID(filepath.Join(dir, ownerFile))
		if !ok || owner == os.Getpid() || alive(owner) {
			continue
		}
		if pid, ok := readPID(filepath.Join(dir, pidFile)); ok && alive(pid) {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			if strings.Contains(string(cmdline), "--config="+layout{dir: dir}.configFile()) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				for deadline := time.Now().Add(10 * time.Second); alive(pid) && time.Now().Before(deadline); {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}
		_ = os.RemoveAll(dir)
	}
}

func readPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
