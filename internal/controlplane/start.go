package controlplane

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/syncpod/syncpod/internal/testnode"
)

// Start is New for tests: it starts a control plane and stops it (Close)
// in t.Cleanup, printing the end of both logs first when t failed. A
// missing binary goes through testnode.Need: a skip normally, a failure
// under SYNCPOD_REALNODE=require or CI=true. Any other error fails t.
func Start(t testing.TB, opts ...Option) *ControlPlane {
	t.Helper()
	cp, err := New(opts...)
	if errors.Is(err, ErrUnavailable) {
		testnode.Need(t, "the control plane (etcd, kube-apiserver)", err)
		return nil // Need has failed or skipped t
	}
	if err != nil {
		t.Fatal(err)
		return nil
	}
	t.Logf("controlplane: kube-apiserver %s at %s, etcd %s at %s; dir %s", APIServerVersion, cp.URL, EtcdVersion, cp.EtcdURL, cp.Dir)
	t.Cleanup(func() {
		if t.Failed() {
			etcdLog, apiLog := cp.LogPaths()
			t.Logf("controlplane: etcd log tail:\n%s", testnode.LogTail(etcdLog, 20))
			t.Logf("controlplane: kube-apiserver log tail:\n%s", testnode.LogTail(apiLog, 40))
			if kcmLog := filepath.Join(cp.Dir, controllerManagerName+".log"); fileExists(kcmLog) {
				t.Logf("controlplane: kube-controller-manager log tail:\n%s", testnode.LogTail(kcmLog, 40))
			}
		}
		if err := cp.Close(); err != nil {
			t.Errorf("controlplane: %v", err)
		}
	})
	return cp
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
