package shim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

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

// critestSeed fixes the order of critest's specs (Ginkgo shuffles its
// top-level containers by seed, and by the clock when no seed is given), so
// that the runs compared below execute the same specs in the same order.
// SYNCPOD_CRITEST_SEED picks another order.
const critestSeed = 1

// TestRealNodeCritestThroughShim runs critest against containerd directly
// and through the shim (default mode), and demands the same pass set; then
// the pod-lifecycle suites through the shim with async RunPodSandbox. Every
// run uses the same seed and starts from the same image store (the pause
// image only), and a spec that passes in one run but not the other is
// reported with critest's failure message.
func TestRealNodeCritestThroughShim(t *testing.T) {
	n := testnode.Start(t, testnode.WithPodNetwork(), testnode.WithMirroredRegistries("registry.k8s.io", "gcr.io", "k8s.gcr.io"))
	critest := filepath.Join(os.Getenv("HOME"), ".cache/syncpod/node/bin/critest")
	_, err := os.Stat(critest)
	testnode.Need(t, "critest (bash hack/install-realnode.sh)", err)
	seed := int64(critestSeed)
	if v := os.Getenv("SYNCPOD_CRITEST_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("SYNCPOD_CRITEST_SEED: %v", err)
		}
	}
	pushCritestImages(t, n)

	removeImages(t, n)
	direct := runCritest(t, n, critest, n.Endpoint, "", critestSkip, seed)
	s := startShim(t, n, shim.Config{})
	removeImages(t, n)
	through := runCritest(t, n, critest, s, "", critestSkip, seed)
	t.Logf("critest seed %d", seed)
	t.Logf("critest direct: %d passed, %d failed, %d skipped", len(direct.passed), len(direct.failed), direct.skipped)
	t.Logf("critest through shim: %d passed, %d failed, %d skipped", len(through.passed), len(through.failed), through.skipped)
	t.Logf("failed directly (out of reach here): %s", strings.Join(direct.failed, "\n  "))
	if d := diffRuns(direct, through, direct.passed); d != "" {
		t.Errorf("pass sets differ (direct vs shim, critest seed %d):\n%s", seed, d)
	}
	if len(direct.passed) < 20 {
		t.Errorf("only %d specs passed directly: the node is not set up for critest", len(direct.passed))
	}

	const lifecycle = `PodSandbox|Container|Multiple Containers|Idempotence|Runtime info`
	directLC := filterPrefix(direct.passed, lifecycle)
	a := startShim(t, n, shim.Config{AsyncRunPodSandbox: true})
	removeImages(t, n)
	async := runCritest(t, n, critest, a, lifecycle, critestSkip, seed)
	t.Logf("critest async RunPodSandbox (lifecycle suites): %d passed, %d failed, %d skipped; direct passed %d of them",
		len(async.passed), len(async.failed), async.skipped, len(directLC))
	if d := diffRuns(direct, async, directLC); d != "" {
		t.Errorf("pass sets differ (direct vs async shim, lifecycle suites, critest seed %d):\n%s", seed, d)
	}
}

// critestResult is one critest run: the names of the specs that passed
// and failed, and why each failed.
type critestResult struct {
	passed, failed []string
	skipped        int
	seed           int64
	// why holds, for each failed spec, critest's failure message, where it
	// failed and the last steps the spec logged.
	why map[string]string
}

func runCritest(t *testing.T, n *testnode.Node, bin, endpoint, focus, skip string, seed int64) critestResult {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	args := []string{"--net=" + n.NetNS(), bin,
		"-runtime-endpoint", endpoint, "-image-endpoint", endpoint,
		"--ginkgo.no-color", "--ginkgo.json-report=" + report, "--ginkgo.skip=" + skip,
		"--ginkgo.seed=" + strconv.FormatInt(seed, 10)}
	if focus != "" {
		args = append(args, "--ginkgo.focus="+focus)
	}
	// A hang guard, not a speed check: a run takes 1 to 3 minutes, and
	// over 6 on these 2 cores when other test packages load them.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	raw, rerr := os.ReadFile(report)
	if rerr != nil {
		t.Fatalf("critest (%v) wrote no report: %v\n%s", err, rerr, tailLines(string(out), 40))
	}
	var reports []struct {
		SuiteConfig struct{ RandomSeed int64 }
		SpecReports []struct {
			ContainerHierarchyTexts    []string
			LeafNodeText               string
			State                      string
			CapturedGinkgoWriterOutput string
			Failure                    struct {
				Message        string
				ForwardedPanic string
				Location       struct {
					FileName   string
					LineNumber int
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &reports); err != nil {
		t.Fatal(err)
	}
	r := critestResult{seed: seed, why: map[string]string{}}
	for _, rep := range reports {
		if rep.SuiteConfig.RandomSeed != seed {
			t.Fatalf("critest ran with seed %d, not %d", rep.SuiteConfig.RandomSeed, seed)
		}
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
				f := s.Failure
				msg := strings.TrimSpace(f.Message)
				if f.ForwardedPanic != "" {
					msg += "\npanic: " + f.ForwardedPanic
				}
				r.why[name] = fmt.Sprintf("%s at %s:%d\n%s\nlast steps:\n%s", s.State,
					filepath.Base(f.Location.FileName), f.Location.LineNumber, msg,
					tailLines(strings.TrimSpace(s.CapturedGinkgoWriterOutput), 12))
			}
		}
	}
	sort.Strings(r.passed)
	sort.Strings(r.failed)
	return r
}

// startShim serves a shim for the node on a socket of its own.
// shimsByNode holds the shim startShim started for each node, for the
// tests that report its counters.
var shimsByNode sync.Map // *testnode.Node -> *shim.Shim

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
	shimsByNode.Store(n, s)
	t.Cleanup(func() {
		shimsByNode.Delete(n)
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
	testnode.Need(t, "the critest images need busybox-static (/bin/busybox; bash hack/realnode-prereqs.sh)", err)
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
	// Each image gets its own content, as upstream: images built from the
	// same files and command would share one image id, so pulling one
	// would add its tags to another's RepoTags and removing one by id would
	// remove the others. Only the test-image-tags:N are one image upstream
	// (critest checks that they share an id).
	push := func(repo, tag, content string, cmd []string) {
		own := maps.Clone(files)
		own["etc/image"] = testnode.File{Data: []byte(content + "\n")}
		n.PushFiles(t, repo, tag, own, nil, cmd)
	}
	push("e2e-test-images/busybox", "1.29-2", "busybox:1.29-2", sh)
	push("e2e-test-images/nginx", "1.14-2", "nginx:1.14-2", server)
	push("e2e-test-images/httpd", "2.4.39-4", "httpd:2.4.39-4", server)
	push("pause", "3.9", "pause:3.9", []string{"sleep", "2147483647"})
	for _, ref := range []string{"test-image-latest:latest", "test-image-tag:test", "test-image-tag:all",
		"test-image-1:latest", "test-image-2:latest", "test-image-3:latest",
		"test-image-tags:1", "test-image-tags:2", "test-image-tags:3", "test-image-predefined-group:latest"} {
		repo, tag, _ := strings.Cut(ref, ":")
		content := ref
		if repo == "test-image-tags" {
			content = repo
		}
		push("k8s-staging-cri-tools/"+repo, tag, content, sh)
	}
}

// removeImages removes every image but the node's sandbox image, so each
// critest run starts from the same image store whatever the previous run
// left behind.
func removeImages(t *testing.T, n *testnode.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	img := n.ImageService()
	list, err := img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	for _, im := range list.GetImages() {
		if slices.Contains(im.GetRepoTags(), n.PauseImage) {
			continue
		}
		if _, err := img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: im.GetId()}}); err != nil {
			t.Fatalf("RemoveImage %s %v: %v", im.GetId(), im.GetRepoTags(), err)
		}
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

// diffRuns compares which specs passed in run a (want: those of them that
// matter) and in run b, listing "- spec" (passed in a only) and "+ spec"
// (passed in b only), each with critest's failure message from the run in
// which it did not pass.
func diffRuns(a, b critestResult, want []string) string {
	inB := map[string]bool{}
	for _, x := range b.passed {
		inB[x] = true
	}
	inWant := map[string]bool{}
	for _, x := range want {
		inWant[x] = true
	}
	var lines []string
	for _, x := range want {
		if !inB[x] {
			lines = append(lines, "- "+x+"\n"+indent(b.reason(x)))
		}
	}
	for _, x := range b.passed {
		if !inWant[x] {
			lines = append(lines, "+ "+x+"\n"+indent(a.reason(x)))
		}
	}
	return strings.Join(lines, "\n")
}

// reason says why spec did not pass in r.
func (r critestResult) reason(spec string) string {
	if why, ok := r.why[spec]; ok {
		return why
	}
	return "not run (skipped or not selected)"
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func tailLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func TestDiffRunsGivesFailureMessages(t *testing.T) {
	direct := critestResult{passed: []string{"a", "b"}, why: map[string]string{"c": "failed at x.go:1\nboom c"}}
	through := critestResult{passed: []string{"a", "c"}, why: map[string]string{"b": "failed at y.go:2\nboom b"}}
	got := diffRuns(direct, through, direct.passed)
	want := "- b\n    failed at y.go:2\n    boom b\n+ c\n    failed at x.go:1\n    boom c"
	if got != want {
		t.Errorf("diffRuns =\n%s\nwant\n%s", got, want)
	}
	if got := diffRuns(direct, critestResult{passed: []string{"b"}}, []string{"a"}); got != "- a\n    not run (skipped or not selected)\n+ b\n    not run (skipped or not selected)" {
		t.Errorf("diffRuns without reasons = %q", got)
	}
	if got := diffRuns(direct, direct, direct.passed); got != "" {
		t.Errorf("diffRuns of equal runs = %q, want empty", got)
	}
}
