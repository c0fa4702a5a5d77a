package kubelethost_test

import (
	"fmt"
	"strings"

	"github.com/syncpod/syncpod/internal/kubelethost"
)

// A test reads the kubelet's PLEG relist histogram from a /metrics page
// (k.Metrics, or k.Histogram which also merges label sets).
func ExampleHistograms() {
	page := `kubelet_pleg_relist_duration_seconds_bucket{le="0.01"} 8
kubelet_pleg_relist_duration_seconds_bucket{le="0.1"} 10
kubelet_pleg_relist_duration_seconds_bucket{le="+Inf"} 10
kubelet_pleg_relist_duration_seconds_sum 0.09
kubelet_pleg_relist_duration_seconds_count 10
`
	samples, err := kubelethost.ParseText(page)
	if err != nil {
		panic(err)
	}
	h := kubelethost.Histograms(samples, kubelethost.RelistDurationMetric)[0]
	fmt.Printf("%d relists, mean %.3fs, p50 %.4fs\n", h.Count, h.Mean(), h.Quantile(0.5))
	// Output: 10 relists, mean 0.009s, p50 0.0063s
}

// The kubelet's log tells which CRI calls failed and with what code
// (k.CRIErrors reads the running kubelet's log).
func ExampleCRIErrors() {
	log := `I1203 10:19:14.517599   19784 server.go:530] "Kubelet version" kubeletVersion="v1.37.2"
E1203 10:20:01.000001   19784 remote_runtime.go:432] "ContainerStatus from runtime service failed" err="rpc error: code = NotFound desc = not found" containerID="abc"
`
	entries, err := kubelethost.ParseLog(strings.NewReader(log))
	if err != nil {
		panic(err)
	}
	for _, e := range kubelethost.CRIErrors(entries) {
		fmt.Println(e.Code(), e.Message)
	}
	// Output: NotFound ContainerStatus from runtime service failed
}
