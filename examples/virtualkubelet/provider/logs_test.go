package provider_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"

	"github.com/syncpod/syncpod/examples/virtualkubelet/provider"
)

// runningLogPod runs pod "logs" (container "app") on a crisim provider
// with a pod log directory, and returns the provider and the container's
// log file, which the test writes (crisim writes no logs) in the CRI log
// format.
func runningLogPod(t *testing.T) (*provider.Provider, string) {
	t.Helper()
	_, cri := startCrisim(t)
	p := newProvider(t, cri, provider.WithPodLogDir(t.TempDir()))
	ctx := context.Background()
	pod := newPod("logs", "uid-logs")
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: appImage}}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var id string
	eventually(t, "the container running", func() string {
		got, err := p.GetPod(ctx, testNamespace, "logs")
		if err != nil {
			return err.Error()
		}
		cs := findStatus(got.Status.ContainerStatuses, "app")
		if cs == nil || cs.State.Running == nil {
			return fmt.Sprintf("status %+v", got.Status.ContainerStatuses)
		}
		_, id, _ = strings.Cut(cs.ContainerID, "://")
		return ""
	})
	st, err := cri.CRI().ContainerStatus(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	path := st.GetStatus().GetLogPath()
	if path == "" {
		t.Fatal("the container has no log path")
	}
	if err := os.MkdirAll(path[:strings.LastIndex(path, "/")], 0o755); err != nil {
		t.Fatal(err)
	}
	return p, path
}

func readAll(t *testing.T, p *provider.Provider, opts api.ContainerLogOpts) string {
	t.Helper()
	r, err := p.GetContainerLogs(context.Background(), testNamespace, "logs", "app", opts)
	if err != nil {
		t.Fatalf("GetContainerLogs(%+v): %v", opts, err)
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("GetContainerLogs(%+v): read: %v", opts, err)
	}
	return string(b)
}

// The log options read a CRI log file as the kubelet does: stdout and
// stderr in the order written, partial lines joined, the last lines with
// Tail (counting the file's lines), the first bytes with LimitBytes, timestamps, since a time or a
// number of seconds ago; Previous without a previous instance and unknown
// names are NotFound.
func TestGetContainerLogsOptions(t *testing.T) {
	p, path := runningLogPod(t)
	old := time.Now().Add(-time.Hour).UTC()
	ts := func(d time.Duration) string { return old.Add(d).Format(time.RFC3339Nano) }
	recentAt := time.Now().UTC().Truncate(time.Microsecond) // trailing zeros, always
	recent := recentAt.Format(time.RFC3339Nano)             // as the runtime writes it
	// The reader prints timestamps as the kubelet does, with all nine
	// digits of the nanoseconds (RFC3339Nano drops trailing zeros).
	recentOut := recentAt.Format("2006-01-02T15:04:05.000000000Z07:00")
	log := ts(0) + " stdout F one\n" +
		ts(time.Second) + " stderr F two\n" +
		ts(2*time.Second) + " stdout P thr\n" +
		ts(3*time.Second) + " stdout F ee\n" +
		recent + " stdout F four\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts api.ContainerLogOpts
		want string
	}{
		{"all", api.ContainerLogOpts{}, "one\ntwo\nthree\nfour\n"},
		// Tail counts the file's lines, as the kubelet's reader does: a
		// line the runtime split (P, then F) counts once per part.
		{"tail", api.ContainerLogOpts{Tail: 3}, "three\nfour\n"},
		{"tail in a split line", api.ContainerLogOpts{Tail: 2}, "ee\nfour\n"},
		{"limit", api.ContainerLogOpts{LimitBytes: 6}, "one\ntw"},
		{"since time", api.ContainerLogOpts{SinceTime: old.Add(1500 * time.Millisecond)}, "three\nfour\n"},
		{"since seconds", api.ContainerLogOpts{SinceSeconds: 600}, "four\n"},
		{"timestamps", api.ContainerLogOpts{Timestamps: true, Tail: 1}, recentOut + " four\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := readAll(t, p, c.opts); got != c.want {
				t.Errorf("GetContainerLogs(%+v) = %q, want %q", c.opts, got, c.want)
			}
		})
	}

	ctx := context.Background()
	for _, c := range []struct {
		what, pod, container string
		opts                 api.ContainerLogOpts
	}{
		{"previous instance", "logs", "app", api.ContainerLogOpts{Previous: true}},
		{"unknown container", "logs", "nope", api.ContainerLogOpts{}},
		{"unknown pod", "nope", "app", api.ContainerLogOpts{}},
	} {
		if _, err := p.GetContainerLogs(ctx, testNamespace, c.pod, c.container, c.opts); !errdefs.IsNotFound(err) {
			t.Errorf("GetContainerLogs of a %s = %v, want NotFound", c.what, err)
		}
	}
	//nolint:staticcheck // a nil ctx is refused, not a panic
	if _, err := p.GetContainerLogs(nil, testNamespace, "logs", "app", api.ContainerLogOpts{}); !errdefs.IsInvalidInput(err) {
		t.Errorf("GetContainerLogs(nil ctx) = %v, want InvalidInput", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.GetContainerLogs(ctx, testNamespace, "logs", "app", api.ContainerLogOpts{}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("GetContainerLogs after Close = %v, want ErrClosed", err)
	}
}

// Follow streams what is appended after the read began, until the reader
// is closed; Close ends the stream's goroutine (goleak checks).
func TestGetContainerLogsFollow(t *testing.T) {
	p, path := runningLogPod(t)
	now := func() string { return time.Now().UTC().Format(time.RFC3339Nano) }
	if err := os.WriteFile(path, []byte(now()+" stdout F before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := p.GetContainerLogs(context.Background(), testNamespace, "logs", "app", api.ContainerLogOpts{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(r)
	if l, err := lines.ReadString('\n'); err != nil || l != "before\n" {
		t.Fatalf("first line %q, %v", l, err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(now() + " stderr F after\n"); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if l, err := lines.ReadString('\n'); err != nil || l != "after\n" {
		t.Fatalf("followed line %q, %v", l, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A node without a pod log directory gives its containers no log file:
// GetContainerLogs says so.
func TestGetContainerLogsWithoutLogDir(t *testing.T) {
	_, cri := startCrisim(t)
	p := newProvider(t, cri)
	ctx := context.Background()
	pod := newPod("nolog", "uid-nolog")
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: appImage}}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the container created", func() string {
		got, err := p.GetPod(ctx, testNamespace, "nolog")
		if err != nil {
			return err.Error()
		}
		if cs := findStatus(got.Status.ContainerStatuses, "app"); cs == nil || cs.ContainerID == "" {
			return "no container ID yet"
		}
		return ""
	})
	if _, err := p.GetContainerLogs(ctx, testNamespace, "nolog", "app", api.ContainerLogOpts{}); !errdefs.IsInvalidInput(err) {
		t.Errorf("GetContainerLogs without a log file = %v, want InvalidInput", err)
	}
}
