package provider

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// /proc/stat and /proc/meminfo are read as the host's busy CPU time (not
// idle, not iowait, guest time counted once) and its memory.
func TestReadProc(t *testing.T) {
	dir := t.TempDir()
	stat := "cpu  100 20 30 1000 50 5 5 10 7 3\ncpu0 50 10 15 500 25 2 2 5 3 1\nbtime 1700000000\n"
	meminfo := "MemTotal:       1000 kB\nMemFree:         300 kB\nMemAvailable:    600 kB\n"
	for name, text := range map[string]string{"stat": stat, "meminfo": meminfo} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	busy, boot, ok := readProcStat(dir)
	// user+nice+system+irq+softirq+steal = 170 jiffies of 10 ms.
	if !ok || busy != 170*10_000_000 || !boot.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("readProcStat = %d, %v, %v; want 1.7e9 ns, btime", busy, boot, ok)
	}
	total, avail, free, ok := readMeminfo(dir)
	if !ok || total != 1000*1024 || avail != 600*1024 || free != 300*1024 {
		t.Errorf("readMeminfo = %d %d %d %v", total, avail, free, ok)
	}
	if _, _, ok := readProcStat(t.TempDir()); ok {
		t.Error("readProcStat of an empty dir: ok")
	}
	if _, _, _, ok := readMeminfo(t.TempDir()); ok {
		t.Error("readMeminfo of an empty dir: ok")
	}
}

// The resource metrics carry the kubelet's names and labels, in seconds
// and bytes, and encode in the text format metrics-server reads, also
// with no pods at all.
func TestResourceMetrics(t *testing.T) {
	at := metav1.NewTime(time.Unix(1700000000, 0))
	u := func(v uint64) *uint64 { return &v }
	sum := &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{NodeName: "n",
			CPU:    &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: u(3e9)},
			Memory: &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: u(1 << 30)}},
		Pods: []statsv1alpha1.PodStats{{
			PodRef: statsv1alpha1.PodReference{Name: "web", Namespace: "default", UID: "u"},
			CPU:    &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: u(5e8)},
			Memory: &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: u(2048)},
			Containers: []statsv1alpha1.ContainerStats{{Name: "app", StartTime: at,
				CPU:    &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: u(5e8)},
				Memory: &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: u(2048)}}},
		}},
	}
	text := encode(t, resourceMetrics(sum))
	for _, want := range []string{
		`container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 0.5 1700000000000`,
		`container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 2048 1700000000000`,
		`container_start_time_seconds{container="app",namespace="default",pod="web"} 1.7e+09 1700000000000`,
		`pod_cpu_usage_seconds_total{namespace="default",pod="web"} 0.5 1700000000000`,
		`pod_memory_working_set_bytes{namespace="default",pod="web"} 2048 1700000000000`,
		`node_cpu_usage_seconds_total 3 1700000000000`,
		`node_memory_working_set_bytes 1.073741824e+09 1700000000000`,
		`resource_scrape_error 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	if text := encode(t, resourceMetrics(&statsv1alpha1.Summary{})); text != "# HELP resource_scrape_error 1 if there was an error while getting container metrics, 0 otherwise\n# TYPE resource_scrape_error gauge\nresource_scrape_error 0\n" {
		t.Errorf("no stats at all:\n%s", text)
	}
}

func encode(t *testing.T, families []*dto.MetricFamily) string {
	t.Helper()
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
