package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/procstat"
	"github.com/syncpod/syncpod/internal/testnode"
)

// On real containerd: the lower bound's costs are measured (a sandbox and
// a container start alone, with the node's CPU they cost; an image pulled
// alone, with its size), the bound of a small burst is at least one pod's
// critical path, and the usage meter finds the node's shims.
func TestRealNodeLowerBound(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "bench/a", testnode.WithSize(2<<20))
	big := n.PushImage(t, "bench/big", testnode.WithSize(40<<20))
	real := &realImages{images: []string{img}, initCmd: []string{"/workload"}, initArgs: []string{"sleep", benchInitRun.String(), "exit", "0"}}
	meter, err := startUsage(n.ContainerdPID(), n.Endpoint, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	sc := burst(1, 3)
	row := realNodeBound(t, n, sc, real, img, big)
	u, err := meter.read()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bound p50 %v, p99 %v, max %v: %s; usage %+v", row.P50, row.P99, row.Makespan, row.Bound, u)
	if row.Mode != boundMode || row.Pods != 3 || row.P50 <= 0 || row.P99 < row.P50 || row.Makespan < row.P99 || row.Bound == "" {
		t.Fatalf("bound row %+v", row)
	}
	// One pod's path: a sandbox, an init container's start and run, a
	// container's start (each measured alone, so each took something).
	// The bandwidth is the large image's, not the small one's.
	if !strings.Contains(row.Bound, "MB/s") {
		t.Errorf("no bandwidth in %q", row.Bound)
	}
	if row.P50 < benchInitRun {
		t.Errorf("bound p50 %v is under the init container's own run %v", row.P50, benchInitRun)
	}
	// The probe's sandboxes ran in shims, which the meter counts with
	// containerd; all of it is part of the node's busy time.
	if u.Runtime <= 0 || u.Node < u.Runtime/2 {
		t.Errorf("usage %+v: want the runtime's CPU counted, within the node's", u)
	}
	// The costs alone: checked directly too, on a fresh probe.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := measureStartCosts(ctx, n.RuntimeService(), n.ImageService(), procstat.Node, costProbe{
		Sandbox:   func(i int) *runtimeapi.PodSandboxConfig { return n.SandboxConfig("probe-check", "probe-check-uid") },
		Container: func(i int) *runtimeapi.ContainerConfig { return n.ContainerConfig("probe", img) },
		Image:     img, N: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Sandbox <= 0 || c.CreateStart <= 0 || c.SandboxCPU <= 0 {
		t.Errorf("costs %+v", c)
	}
}
