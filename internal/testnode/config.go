package testnode

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// tomlEdit sets key = value inside one table of a TOML file written by
// `containerd config default`. The table "" is the top level.
type tomlEdit struct {
	table, key, value string
}

// quote renders a TOML literal string.
func quote(s string) string { return "'" + s + "'" }

// applyEdits rewrites the lines of cfg. Every edit must find its line, so
// a change in containerd's default layout shows up as a clear error rather
// than as a node that silently uses /var/lib/containerd.
func applyEdits(cfg string, edits []tomlEdit) (string, error) {
	lines := strings.Split(cfg, "\n")
	done := make([]bool, len(edits))
	table := ""
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "[") {
			table = strings.Trim(trimmed, "[]")
			continue
		}
		key, _, ok := strings.Cut(trimmed, "=")
		if !ok {
			continue
		}
		key = strings.TrimSpace(key)
		for j, e := range edits {
			if !done[j] && e.table == table && e.key == key {
				indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
				lines[i] = indent + key + " = " + e.value
				done[j] = true
			}
		}
	}
	var missing []string
	for j, e := range edits {
		if !done[j] {
			missing = append(missing, fmt.Sprintf("[%s] %s", e.table, e.key))
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("containerd default config has no %s", strings.Join(missing, ", "))
	}
	return strings.Join(lines, "\n"), nil
}

// containerdConfig renders the node's config: containerd's own defaults
// with every path private to the node and the changes this machine needs
// (see the package documentation).
func (n *Node) containerdConfig(o *options) (string, error) {
	out, err := exec.Command(n.bins.containerd, "config", "default").Output()
	if err != nil {
		return "", fmt.Errorf("containerd config default: %w", err)
	}
	const (
		images   = "plugins.'io.containerd.cri.v1.images'"
		runtime  = "plugins.'io.containerd.cri.v1.runtime'"
		runc     = runtime + ".containerd.runtimes.runc"
		transfer = "plugins.'io.containerd.transfer.v1.local'"
	)
	edits := []tomlEdit{
		{"", "root", quote(n.path("root"))},
		{"", "state", quote(n.path("state"))},
		{"", "temp", quote(n.path("tmp"))},
		{"", "imports", "[]"},
		{"debug", "level", quote(o.logLevel)},
		// containerd's default, always: since 2.1 a CRI
		// max_concurrent_downloads other than 3 silently switches the CRI
		// to its local pull path. The CRI pulls through the transfer
		// service, whose own key (below) caps its downloads.
		{images, "max_concurrent_downloads", "3"},
		{images, "use_local_image_pull", "false"},
		{transfer, "max_concurrent_downloads", strconv.Itoa(o.maxConcurrentDownloads)},
		{images + ".pinned_images", "sandbox", quote(n.PauseImage)},
		{images + ".registry", "config_path", quote(n.path("certs.d"))},
		// Required here: no CAP_SYS_RESOURCE, so without it every
		// RunPodSandbox fails writing /proc/self/oom_score_adj.
		{runtime, "restrict_oom_score_adj", "true"},
		{runtime, "cdi_spec_dirs", "[]"},
		{runc + ".options", "BinaryName", quote(n.bins.runc)},
		{runc + ".options", "Root", quote(n.path("runc"))},
		{runtime + ".cni", "bin_dirs", "[" + quote(n.path("cni", "bin")) + "]"},
		{runtime + ".cni", "conf_dir", quote(n.path("cni", "net.d"))},
		{"plugins.'io.containerd.image-verifier.v1.bindir'", "bin_dir", quote(n.path("image-verifier"))},
		{"plugins.'io.containerd.internal.v1.opt'", "path", quote(n.path("opt"))},
		// NRI listens on a machine-wide socket; nodes running side by
		// side would fight over it.
		{"plugins.'io.containerd.nri.v1.nri'", "disable", "true"},
		{"plugins.'io.containerd.nri.v1.nri'", "socket_path", quote(n.path("nri.sock"))},
		{"plugins.'io.containerd.server.v1.grpc'", "address", quote(n.socket)},
		{"plugins.'io.containerd.server.v1.ttrpc'", "address", quote(n.socket + ".ttrpc")},
		{transfer, "config_path", quote(n.path("certs.d"))},
	}
	if sd := n.path("s"); len(sd) <= 42 { // containerd's limit for socket_dir
		edits = append(edits, tomlEdit{"plugins.'io.containerd.shim.v1.manager'", "socket_dir", quote(sd)})
	}
	cfg, err := applyEdits(string(out), edits)
	if err != nil {
		return "", err
	}
	for _, edit := range o.configEdits {
		cfg = edit(cfg)
	}
	return cfg, nil
}

// hostsToml sends pulls of the loopback registry over plain HTTP.
func hostsToml(registry string) string {
	return fmt.Sprintf(`server = "http://%[1]s"

[host."http://%[1]s"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
`, registry)
}
