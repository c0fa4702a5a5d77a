package kubelethost

import (
	"errors"
	"testing"

	"github.com/syncpod/syncpod/internal/testnode"
)

// Start is New for tests: it starts a kubelet on the CRI at endpoint and
// stops it (Close) in t.Cleanup, printing the end of its log first when t
// failed. A missing prerequisite (the kubelet binary, unshare, root) goes
// through testnode.Need: a skip normally, a failure under
// SYNCPOD_REALNODE=require or CI=true. Any other error fails t.
func Start(t testing.TB, endpoint string, opts ...Option) *Kubelet {
	t.Helper()
	k, err := New(endpoint, opts...)
	if errors.Is(err, ErrUnavailable) {
		testnode.Need(t, "the real kubelet", err)
		return nil // Need has failed or skipped t
	}
	if err != nil {
		t.Fatal(err)
		return nil
	}
	t.Logf("kubelethost: kubelet %s (pid %d, node %s) on %s; dir %s", Version, k.PID(), k.NodeName, endpoint, k.Dir)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubelethost: kubelet log tail (%s):\n%s", k.LogPath, k.Tail(60))
		}
		if err := k.Close(); err != nil {
			t.Errorf("kubelethost: %v", err)
		}
	})
	return k
}
