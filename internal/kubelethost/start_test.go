package kubelethost_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/syncpod/syncpod/internal/kubelethost"
)

// gateRecorder is a testing.TB that records how it was first failed or
// skipped instead of stopping the test (a real Fatalf or Skipf would end
// the goroutine there, so later calls are ignored).
type gateRecorder struct {
	testing.TB
	failed, skipped string
}

func (g *gateRecorder) Helper() {}

func (g *gateRecorder) Fatalf(format string, args ...any) { g.fail(fmt.Sprintf(format, args...)) }

func (g *gateRecorder) Fatal(args ...any) { g.fail(fmt.Sprint(args...)) }

func (g *gateRecorder) Skipf(format string, args ...any) {
	if g.failed == "" && g.skipped == "" {
		g.skipped = fmt.Sprintf(format, args...)
	}
}

func (g *gateRecorder) fail(msg string) {
	if g.failed == "" && g.skipped == "" {
		g.failed = msg
	}
}

// TestStartWithoutKubelet checks the gate: with no kubelet binary, Start
// fails the test when a real node is required and skips it otherwise.
func TestStartWithoutKubelet(t *testing.T) {
	for _, tc := range []struct {
		mode     string
		wantFail bool
	}{{"require", true}, {"auto", false}} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Setenv("SYNCPOD_REALNODE", tc.mode)
			t.Setenv("CI", "")
			g := &gateRecorder{TB: t}
			k := kubelethost.Start(g, "unix:///tmp/none.sock", kubelethost.WithBinDir(t.TempDir()))
			if k != nil {
				t.Fatal("Start without a kubelet binary returned a kubelet")
			}
			got := g.skipped
			if tc.wantFail {
				got = g.failed
				if g.skipped != "" {
					t.Errorf("skipped under require: %s", g.skipped)
				}
			} else if g.failed != "" {
				t.Errorf("failed under auto: %s", g.failed)
			}
			if !strings.Contains(got, "kubelet") || !strings.Contains(got, "install-kube.sh") {
				t.Errorf("message %q does not say that the kubelet is missing and how to install it", got)
			}
		})
	}
}
