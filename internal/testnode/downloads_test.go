package testnode

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// tomlValue reads key's value inside table from TOML text as `containerd
// config dump` prints it ("" when absent).
func tomlValue(cfg, table, key string) string {
	current := ""
	for _, line := range strings.Split(cfg, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "[") {
			current = strings.Trim(trimmed, "[]")
			continue
		}
		k, v, ok := strings.Cut(trimmed, "=")
		if ok && current == table && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// WithMaxConcurrentDownloads(8) takes effect: containerd's own dump of
// the config it runs with holds 8 for the transfer service and keeps the
// CRI on the transfer service (use_local_image_pull false, the CRI key at
// its default 3), containerd logs no fallback to local pull, and a CRI
// pull works; SetMaxConcurrentDownloads changes it on the running node.
func TestRealNodeMaxConcurrentDownloads(t *testing.T) {
	n := Start(t, WithMaxConcurrentDownloads(8))
	img := n.PushImage(t, "tn/downloads", WithLayers(4))
	if _, err := n.ImageService().PullImage(ctxT(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
		t.Fatal(err)
	}
	checkDownloads(t, n, "8")
	n.SetMaxConcurrentDownloads(t, 2)
	checkDownloads(t, n, "2")
	if _, err := n.ImageService().RemoveImage(ctxT(t), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ImageService().PullImage(ctxT(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
		t.Fatalf("pull after SetMaxConcurrentDownloads: %v", err)
	}
}

// checkDownloads reads containerd's dump of its config and its log.
func checkDownloads(t *testing.T, n *Node, want string) {
	t.Helper()
	out, err := exec.Command(n.bins.containerd, "--config", n.cfgPath, "config", "dump").Output()
	if err != nil {
		t.Fatalf("containerd config dump: %v", err)
	}
	dump := string(out)
	for _, c := range []struct{ table, key, want string }{
		{"plugins.'io.containerd.transfer.v1.local'", "max_concurrent_downloads", want},
		{"plugins.'io.containerd.cri.v1.images'", "max_concurrent_downloads", "3"},
		{"plugins.'io.containerd.cri.v1.images'", "use_local_image_pull", "false"},
	} {
		if got := tomlValue(dump, c.table, c.key); got != c.want {
			t.Errorf("config dump: [%s] %s = %q, want %s", c.table, c.key, got, c.want)
		}
	}
	log, err := os.ReadFile(n.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, fallbackWarning) {
			t.Errorf("containerd fell back to local pull: %s", line)
		}
	}
}

// fallbackWarning ends the line containerd 2.4.2 logs when a CRI image
// setting makes it leave the transfer service for its local pull path.
const fallbackWarning = "Falling back to local image pull mode."

// The fallback the option avoids: containerd 2.4.2 logs a CRI
// max_concurrent_downloads other than 3 as a switch to local pull.
func TestRealNodeCRIDownloadsFallBack(t *testing.T) {
	n := Start(t, WithConfigEdit(func(cfg string) string {
		return strings.Replace(cfg, "max_concurrent_downloads = 3", "max_concurrent_downloads = 8", 1)
	}))
	log, err := os.ReadFile(n.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	const want = "Found 'MaxConcurrentDownloads' in CRI config which is incompatible with transfer service"
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, want) && strings.Contains(line, fallbackWarning) {
			return
		}
	}
	t.Fatalf("containerd did not log %q ... %q; log:\n%s", want, fallbackWarning, LogTail(n.LogPath(), 20))
}
