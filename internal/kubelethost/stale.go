package kubelethost

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"

	"github.com/syncpod/syncpod/internal/testnode"
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
		if !testnode.OwnerGone(dir) {
			continue
		}
		testnode.KillRecorded(filepath.Join(dir, pidFile), "--config="+layout{dir: dir}.configFile())
		_ = os.RemoveAll(dir)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
