package testnode

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how Start ended the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Fatal(args ...any)              { r.fatal = fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Fatalf(f string, args ...any)   { r.fatal = fmt.Sprintf(f, args...); runtime.Goexit() }
func (r *recorder) Skipf(f string, args ...any)    { r.skip = fmt.Sprintf(f, args...); runtime.Goexit() }
func (r *recorder) Cleanup(func())                 { panic("Start must not register cleanups before it can run") }
func (r *recorder) Logf(format string, a ...any)   {}
func (r *recorder) Errorf(format string, a ...any) { r.fatal = fmt.Sprintf(format, a...) }

// startWith runs Start on a recorder in its own goroutine, as the testing
// package runs a test, so that Fatal and Skip can end it.
func startWith(t *testing.T, opts ...Option) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(r, opts...)
		r.fatal = "Start returned a node"
	}()
	<-done
	return r
}

func TestStartGating(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		mode, ci  string
		wantFatal bool
		want      string
	}{
		{mode: "", ci: "", wantFatal: false, want: "install-realnode.sh"},
		{mode: "auto", ci: "", wantFatal: false, want: filepath.Join(empty, "containerd")},
		{mode: "require", ci: "", wantFatal: true, want: "bash hack/install-realnode.sh"},
		{mode: "", ci: "true", wantFatal: true, want: filepath.Join(empty, "runc")},
		{mode: "off", ci: "true", wantFatal: false, want: "disabled by SYNCPOD_REALNODE=off"},
		{mode: "yes", ci: "", wantFatal: true, want: `SYNCPOD_REALNODE="yes" is not one of`},
	} {
		t.Run(tc.mode+"/ci="+tc.ci, func(t *testing.T) {
			t.Setenv(EnvMode, tc.mode)
			t.Setenv(EnvCI, tc.ci)
			r := startWith(t, WithBinDir(empty))
			got, other := r.skip, r.fatal
			if tc.wantFatal {
				got, other = r.fatal, r.skip
			}
			if got == "" || other != "" {
				t.Fatalf("fatal=%q skip=%q, want fatal=%v", r.fatal, r.skip, tc.wantFatal)
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("message %q does not contain %q", got, tc.want)
			}
		})
	}
}

func TestStartGatingWrongVersion(t *testing.T) {
	dir := t.TempDir()
	for _, b := range []string{"containerd-shim-runc-v2", "runc"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fake := "#!/bin/sh\necho containerd github.com/containerd/containerd/v2 1.7.0\n"
	if err := os.WriteFile(filepath.Join(dir, "containerd"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvMode, "require")
	r := startWith(t, WithBinDir(dir))
	if !strings.Contains(r.fatal, "want containerd "+ContainerdVersion) {
		t.Errorf("fatal = %q, want a version complaint", r.fatal)
	}
}

func TestDefaultBinDir(t *testing.T) {
	t.Setenv(EnvBinDir, "/some/bin")
	if got := defaultBinDir(); got != "/some/bin" {
		t.Errorf("defaultBinDir with %s set = %q", EnvBinDir, got)
	}
	t.Setenv(EnvBinDir, "")
	t.Setenv("HOME", "/home/x")
	if got := defaultBinDir(); got != "/home/x/.cache/syncpod/node/bin" {
		t.Errorf("defaultBinDir = %q", got)
	}
}

func TestApplyEdits(t *testing.T) {
	cfg := "root = '/var/lib/containerd'\n[a]\n  x = 1\n  [a.b]\n    x = 2\n"
	got, err := applyEdits(cfg, []tomlEdit{{"", "root", "'/r'"}, {"a.b", "x", "3"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "root = '/r'\n[a]\n  x = 1\n  [a.b]\n    x = 3\n"
	if got != want {
		t.Errorf("applyEdits = %q, want %q", got, want)
	}
	if _, err := applyEdits(cfg, []tomlEdit{{"a", "missing", "1"}}); err == nil || !strings.Contains(err.Error(), "[a] missing") {
		t.Errorf("applyEdits with a missing key: err = %v", err)
	}
}

func TestSplitV2Path(t *testing.T) {
	for _, tc := range []struct {
		path, kind, repo, ref string
		ok                    bool
	}{
		{"/v2/a/b/blobs/sha256:00", "blobs", "a/b", "sha256:00", true},
		{"/v2/pause/manifests/3.10", "manifests", "pause", "3.10", true},
		{"/v2/a/blobs/uploads/x", "blobs", "", "", false},
		{"/v2/", "blobs", "", "", false},
	} {
		repo, ref, ok := splitV2Path(tc.path, tc.kind)
		if repo != tc.repo || ref != tc.ref || ok != tc.ok {
			t.Errorf("splitV2Path(%q) = %q %q %v", tc.path, repo, ref, ok)
		}
	}
}

func TestHasAddress(t *testing.T) {
	sock := "/tmp/spnode-1/containerd.sock"
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "x", "-address", sock}, true},
		{[]string{"containerd-shim-runc-v2", "-address=" + sock}, true},
		{[]string{"/bin/containerd-shim-runc-v2", "-address", "/run/containerd/containerd.sock"}, false},
		{[]string{"/bin/sleep", "-address", sock}, false},
	} {
		if got := hasAddress(tc.args, sock); got != tc.want {
			t.Errorf("hasAddress(%q) = %v", tc.args, got)
		}
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	if got := unescapeMountinfo(`/a\040b\134c`); got != `/a b\c` {
		t.Errorf("unescapeMountinfo = %q", got)
	}
}
