package shim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/syncpod/syncpod/examples/crishim/shim"
	"github.com/syncpod/syncpod/internal/testnode"
)

// critestSkip leaves out what cannot pass on this machine whoever serves
// the CRI and would cost minutes of timeouts (each fails directly against
// containerd too): streaming and port-forward checks (60 s timeouts), NRI
// (disabled in the test node), AppArmor (not on this kernel), image volumes
// (feature-gated), OOM (no memory cgroup limits here), specs that need the
// digest-pinned or user-specific gcr.io test images, and five specs that
// time out against containerd directly with the busybox stand-in images
// (container log: 60 s; SupplementalGroupsPolicy x2: 60 s each, need the
// test-image-user images; HostPID and ContainerPID: 30 s each, need nginx's
// process layout).
const critestSkip = `Streaming|[Pp]ort ?[Ff]orward|NRI|AppArmor|Image Volume|OOM|digest|Image Identifier|` +
	`should support pull image with|test-image-user|image user|should support container log|` +
	`SupplementalGroupsPolicy|should support HostPID|should support ContainerPID`

// TestRealNodeCritestThroughShim runs critest against containerd directly
// and through the shim (default mode), and demands the same pass set; then
// the pod-lifecycle suites through the shim with async RunPodSandbox.
func TestRealNodeCritestThroughShim(t *testing.T) {
	n := testnode.Start(t, testnode.WithPodNetwork(), testnode.WithMirroredRegistries("registry.k8s.io", "gcr.io", "k8s.gcr.io"))
	critest := filepath.Join(os.Getenv("HOME"), ".cache/syncpod/node/bin/critest")
	if _, err := os.Stat(critest); err != nil {
		t.Skipf("critest not installed: %v", err)
	}
	pushCritestImages(t, n)

	direct := runCritest(t, n, critest, n.Endpoint, "", critestSkip)
	s := startShim(t, n, shim.Config{})
	through := runCritest(t, n, critest, s, "", critestSkip)
	t.Logf("critest direct: %d passed, %d failed, %d skipped", len(direct.passed), len(direct.failed), direct.skipped)
	t.Logf("critest through shim: %d passed, %d failed, %d skipped", len(through.passed), len(through.failed), through.skipped)
	t.Logf("failed directly (out of reach here): %s", strings.Join(direct.failed, "\n  "))
	if d := diff(direct.passed, through.passed); d != "" {
		t.Errorf("pass sets differ (direct vs shim):\n%s", d)
	}
	if len(direct.passed) < 20 {
		t.Errorf("only %d specs passed directly: the node is not set up for critest", len(direct.passed))
	}

	const lifecycle = `PodSandbox|Container|Multiple Containers|Idempotence|Runtime info`
	directLC := filterPrefix(direct.passed, lifecycle)
	a := startShim(t, n, shim.Config{AsyncRunPodSandbox: true})
	async := runCritest(t, n, critest, a, lifecycle, critestSkip)
	t.Logf("critest async RunPodSandbox (lifecycle suites): %d passed, %d failed, %d skipped; direct passed %d of them",
		len(async.passed), len(async.failed), async.skipped, len(directLC))
	if d := diff(directLC, async.passed); d != "" {
		t.Errorf("pass sets differ (direct vs async shim, lifecycle suites):\n%s", d)
	}
}

type critestResult struct {
	passed, failed []string
	skipped        int
}

func runCritest(t *testing.T, n *testnode.Node, bin, endpoint, focus, skip string) critestResult {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	args := []string{"--net=" + n.NetNS(), bin,
		"-runtime-endpoint", endpoint, "-image-endpoint", endpoint,
		"--ginkgo.no-color", "--ginkgo.json-report=" + report, "--ginkgo.skip=" + skip}
	if focus != "" {
		args = append(args, "--ginkgo.focus="+focus)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	raw, rerr := os.ReadFile(report)
	if rerr != nil {
		t.Fatalf("critest (%v) wrote no report: %v\n%s", err, rerr, tailLines(string(out), 40))
	}
	var reports []struct {
		SpecReports []struct {
			ContainerHierarchyTexts []string
			LeafNodeText            string
			State                   string
		}
	}
	if err := json.Unmarshal(raw, &reports); err != nil {
		t.Fatal(err)
	}
	var r critestResult
	for _, rep := range reports {
		for _, s := range rep.SpecReports {
			if s.LeafNodeText == "" {
				continue
			}
			name := strings.Join(append(s.ContainerHierarchyTexts, s.LeafNodeText), " ")
			switch s.State {
			case "passed":
				r.passed = append(r.passed, name)
			case "skipped", "pending":
				r.skipped++
			default:
				r.failed = append(r.failed, name)
			}
		}
	}
	sort.Strings(r.passed)
	sort.Strings(r.failed)
	return r
}

// startShim serves a shim for the node on a socket of its own.
func startShim(t *testing.T, n *testnode.Node, cfg shim.Config) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := shim.New(ctx, n.Endpoint, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(n.Dir, fmt.Sprintf("crishim-%d.sock", time.Now().UnixNano()%1e6))
	l, err := shim.Listen("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	s.Register(gs)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(l) }()
	t.Cleanup(func() {
		_ = s.Drain(context.Background())
		gs.Stop()
		<-done
		_ = s.Close()
	})
	return "unix://" + sock
}

func pushCritestImages(t *testing.T, n *testnode.Node) {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("critest images need busybox-static (/bin/busybox): %v", err)
	}
	out, err := exec.Command("/bin/busybox", "--list-full").Output()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]testnode.File{
		"bin/busybox":       {Data: bb, Mode: 0o755},
		"etc/passwd":        {Data: []byte("root:x:0:0:root:/root:/bin/sh\nwww-data:x:33:33:www-data:/var/www:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n")},
		"etc/group":         {Data: []byte("root:x:0:\nwww-data:x:33:\nnobody:x:65534:\n")},
		"www/index.html":    {Data: []byte("<h1>Welcome to nginx!</h1>\n")},
		"etc/nginx/.keep":   {Data: []byte{}},
		"root/.keep":        {Data: []byte{}},
		"tmp/.keep":         {Data: []byte{}},
		"var/www/.keep":     {Data: []byte{}},
		"usr/share/.keep":   {Data: []byte{}},
		"var/log/.keep":     {Data: []byte{}},
		"home/.keep":        {Data: []byte{}},
		"usr/local/.keep":   {Data: []byte{}},
		"usr/sbin/.keep":    {Data: []byte{}},
		"usr/bin/.keep":     {Data: []byte{}},
		"sbin/.keep":        {Data: []byte{}},
		"var/run/.keep":     {Data: []byte{}},
		"var/lib/.keep":     {Data: []byte{}},
		"etc/hostname":      {Data: []byte("busybox\n")},
		"etc/nsswitch.conf": {Data: []byte("hosts: files dns\n")},
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "bin/busybox" {
			continue
		}
		files[p] = testnode.File{Link: "/bin/busybox"}
	}
	sh := []string{"sh"}
	server := []string{"httpd", "-f", "-p", "80", "-h", "/www"}
	n.PushFiles(t, "e2e-test-images/busybox", "1.29-2", files, nil, sh)
	n.PushFiles(t, "e2e-test-images/nginx", "1.14-2", files, nil, server)
	n.PushFiles(t, "e2e-test-images/httpd", "2.4.39-4", files, nil, server)
	n.PushFiles(t, "pause", "3.9", files, nil, []string{"sleep", "2147483647"})
	for _, ref := range []string{"test-image-latest:latest", "test-image-tag:test", "test-image-tag:all",
		"test-image-1:latest", "test-image-2:latest", "test-image-3:latest",
		"test-image-tags:1", "test-image-tags:2", "test-image-tags:3", "test-image-predefined-group:latest"} {
		repo, tag, _ := strings.Cut(ref, ":")
		n.PushFiles(t, "k8s-staging-cri-tools/"+repo, tag, files, nil, sh)
	}
}

func filterPrefix(names []string, alternatives string) []string {
	var out []string
	for _, nm := range names {
		for _, a := range strings.Split(alternatives, "|") {
			if strings.HasPrefix(nm, "[k8s.io] "+a+" ") {
				out = append(out, nm)
				break
			}
		}
	}
	return out
}

func diff(a, b []string) string {
	in := func(xs []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var lines []string
	for _, x := range a {
		if !mb[x] {
			lines = append(lines, "- "+x)
		}
	}
	for _, x := range b {
		if !ma[x] {
			lines = append(lines, "+ "+x)
		}
	}
	return strings.Join(lines, "\n")
}

func tailLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
