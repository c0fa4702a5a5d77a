package controlplane

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/syncpod/syncpod/internal/testnode"
)

// dirPattern names control-plane directories, so that a later run can find
// those a killed test binary left behind.
const dirPattern = "controlplane-"

var staleOnce sync.Once

// reapStale removes, once per process, the directories of test binaries
// that died without running their cleanups, and kills a process still
// running from one, only if its command line names that directory.
func reapStale() {
	staleOnce.Do(func() {
		dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPattern+"*"))
		for _, dir := range dirs {
			if !testnode.OwnerGone(dir) {
				continue
			}
			for _, name := range []string{controllerManagerName, apiServerName, etcdName} {
				testnode.KillRecorded(filepath.Join(dir, name+".pid"), dir)
			}
			_ = os.RemoveAll(dir)
		}
	})
}
