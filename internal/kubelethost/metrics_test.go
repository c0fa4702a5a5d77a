package kubelethost_test

import (
	"math"
	"strings"
	"testing"

	"github.com/syncpod/syncpod/internal/kubelethost"
)

const relistPage = `# HELP kubelet_pleg_relist_duration_seconds [ALPHA] Duration in seconds for relisting pods in PLEG.
# TYPE kubelet_pleg_relist_duration_seconds histogram
kubelet_pleg_relist_duration_seconds_bucket{le="0.005"} 2
kubelet_pleg_relist_duration_seconds_bucket{le="0.01"} 6
kubelet_pleg_relist_duration_seconds_bucket{le="0.025"} 9
kubelet_pleg_relist_duration_seconds_bucket{le="+Inf"} 10
kubelet_pleg_relist_duration_seconds_sum 0.125
kubelet_pleg_relist_duration_seconds_count 10
kubelet_pleg_last_seen_seconds 1.796293168e+09
kubelet_pod_worker_duration_seconds_bucket{operation_type="create",le="1"} 1
kubelet_pod_worker_duration_seconds_bucket{operation_type="create",le="+Inf"} 1
kubelet_pod_worker_duration_seconds_sum{operation_type="create"} 0.5
kubelet_pod_worker_duration_seconds_count{operation_type="create"} 1
kubelet_pod_worker_duration_seconds_bucket{le="+Inf",operation_type="sync"} 3
kubelet_pod_worker_duration_seconds_bucket{operation_type="sync",le="1"} 2
kubelet_pod_worker_duration_seconds_sum{operation_type="sync"} 1.5
kubelet_pod_worker_duration_seconds_count{operation_type="sync"} 3 1796293168000
weird_label{path="/a\"b\\c\nd", x = "y" } 7
`

func TestParseTextAndHistograms(t *testing.T) {
	samples, err := kubelethost.ParseText(relistPage)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 16 {
		t.Fatalf("got %d samples, want 16", len(samples))
	}
	last := samples[len(samples)-1]
	if last.Name != "weird_label" || last.Labels["path"] != "/a\"b\\c\nd" || last.Labels["x"] != "y" || last.Value != 7 {
		t.Errorf("escaped labels: %+v", last)
	}
	if v, ok := kubelethost.Value(samples, kubelethost.PLEGLastSeenMetric); !ok || v != 1.796293168e9 {
		t.Errorf("Value(last seen) = %v, %v", v, ok)
	}
	if _, ok := kubelethost.Value(samples, "absent"); ok {
		t.Error("Value found an absent series")
	}

	hs := kubelethost.Histograms(samples, kubelethost.RelistDurationMetric)
	if len(hs) != 1 {
		t.Fatalf("got %d relist histograms, want 1", len(hs))
	}
	h := hs[0]
	if h.Count != 10 || h.Sum != 0.125 || len(h.Buckets) != 4 || !math.IsInf(h.Buckets[3].UpperBound, 1) || h.Buckets[1].Count != 6 {
		t.Errorf("relist histogram = %+v", h)
	}
	if got := h.Mean(); got != 0.0125 {
		t.Errorf("Mean = %v, want 0.0125", got)
	}
	// The median, rank 5, lies in (0.005, 0.01] which holds ranks 3-6.
	if got := h.Quantile(0.5); math.Abs(got-0.00875) > 1e-12 {
		t.Errorf("Quantile(0.5) = %v, want 0.00875", got)
	}
	if got := h.Quantile(0.99); got != 0.025 {
		t.Errorf("Quantile(0.99) in the +Inf bucket = %v, want the largest finite bound 0.025", got)
	}
	if got := h.Quantile(0); got != 0 {
		t.Errorf("Quantile(0) = %v", got)
	}
	if !math.IsNaN(h.Quantile(2)) || !math.IsNaN((kubelethost.Histogram{}).Quantile(0.5)) {
		t.Error("Quantile out of range or of an empty histogram is not NaN")
	}
	if s := h.String(); !strings.Contains(s, "n=10") || !strings.Contains(s, "mean=0.0125s") {
		t.Errorf("String = %q", s)
	}

	workers := kubelethost.Histograms(samples, "kubelet_pod_worker_duration_seconds")
	if len(workers) != 2 || workers[0].Labels["operation_type"] != "create" || workers[1].Labels["operation_type"] != "sync" {
		t.Fatalf("worker histograms = %+v", workers)
	}
	if b := workers[1].Buckets; b[0].UpperBound != 1 || b[0].Count != 2 || b[1].Count != 3 {
		t.Errorf("buckets are not sorted by bound: %+v", b)
	}
	all, err := kubelethost.Merge(workers...)
	if err != nil {
		t.Fatal(err)
	}
	if all.Count != 4 || all.Sum != 2 || all.Buckets[0].Count != 3 || all.Buckets[1].Count != 4 || len(all.Labels) != 0 {
		t.Errorf("Merge = %+v", all)
	}
	if _, err := kubelethost.Merge(h, workers[0]); err == nil {
		t.Error("Merge of histograms with different buckets succeeded")
	}
	if z, err := kubelethost.Merge(); err != nil || z.Count != 0 {
		t.Errorf("Merge() = %+v, %v", z, err)
	}
	if hs := kubelethost.Histograms(samples, "kubelet_pleg_relist"); len(hs) != 0 {
		t.Errorf("a name prefix matched %d histograms", len(hs))
	}
}

func TestHistogramSub(t *testing.T) {
	before := kubelethost.Histogram{Name: "h", Sum: 1, Count: 2, Buckets: []kubelethost.Bucket{{UpperBound: 1, Count: 2}, {UpperBound: math.Inf(1), Count: 2}}}
	after := kubelethost.Histogram{Name: "h", Sum: 4, Count: 5, Buckets: []kubelethost.Bucket{{UpperBound: 1, Count: 3}, {UpperBound: math.Inf(1), Count: 5}}}
	d := after.Sub(before)
	if d.Count != 3 || d.Sum != 3 || d.Buckets[0].Count != 1 || d.Buckets[1].Count != 3 {
		t.Errorf("Sub = %+v", d)
	}
	if r := before.Sub(after); r.Count != 0 || r.Buckets[0].Count != 0 {
		t.Errorf("Sub of a later scrape (restarted kubelet) = %+v, want zero counts", r)
	}
}

func TestParseTextRefusesBadLines(t *testing.T) {
	for _, line := range []string{
		"novalue",
		`a{b="c"`,
		`a{b=c} 1`,
		`a{b="c} 1`,
		"a notanumber",
		"a 1 2 3",
	} {
		if _, err := kubelethost.ParseText(line + "\n"); err == nil {
			t.Errorf("ParseText(%q) succeeded", line)
		}
	}
}
