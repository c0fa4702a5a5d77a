package kubelethost_test

import (
	"strings"
	"testing"

	"github.com/syncpod/syncpod/internal/kubelethost"
)

const kubeletLog = `kubelethost wrapper noise
I1203 10:19:14.517599   19784 server.go:530] "Kubelet version" kubeletVersion="v1.37.2"
E1203 10:19:14.528183   19784 server.go:1332] "Failed to set rlimit on max file handles" err="operation not permitted"
E1203 10:19:14.558993   19784 kubelet.go:2697] "Skipping pod synchronization" err="[container runtime status check may not have completed yet, PLEG is not healthy: pleg has yet to be successful]"
E1203 10:20:01.000001   19784 remote_runtime.go:432] "ContainerStatus from runtime service failed" err="rpc error: code = NotFound desc = an error occurred when try to find container \"abc\": not found" containerID="abc"
E1203 10:20:02.000001   19784 kuberuntime_sandbox.go:72] "Failed to create sandbox for pod" err="rpc error: code = Unavailable desc = crishim: shutting down
second line of the error" pod="default/web-node"
W1203 10:20:03.000001   19784 logging.go:55] [core] grpc: addrConn.createTransport failed: rpc error: code = Unavailable
E1203 10:25:00.000001   19784 kubelet.go:2697] "Skipping pod synchronization" err="PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s"
E1203 10:25:01.000001   19784 generic.go:1] unstructured failure without quotes
`

func TestParseLog(t *testing.T) {
	entries, err := kubelethost.ParseLog(strings.NewReader(kubeletLog))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 8 {
		t.Fatalf("got %d entries, want 8 (wrapper noise dropped, continuation joined)", len(entries))
	}
	if e := entries[0]; e.Severity != 'I' || e.Source != "server.go:530" || e.Message != "Kubelet version" || e.Err != "" {
		t.Errorf("entry 0 = %+v", e)
	}
	if e := entries[1]; e.Message != "Failed to set rlimit on max file handles" || e.Err != "operation not permitted" {
		t.Errorf("entry 1 = %+v", e)
	}
	if e := entries[3]; !strings.Contains(e.Err, `find container "abc"`) || e.Code() != "NotFound" {
		t.Errorf("entry 3: err %q, code %q", e.Err, e.Code())
	}
	if e := entries[4]; !strings.HasSuffix(e.Raw, `second line of the error" pod="default/web-node"`) || e.Code() != "Unavailable" {
		t.Errorf("continuation line not joined: %q", e.Raw)
	}
	if e := entries[7]; e.Message != "unstructured failure without quotes" || e.Err != "" {
		t.Errorf("unstructured entry = %+v", e)
	}

	cri := kubelethost.CRIErrors(entries)
	if len(cri) != 2 || cri[0].Code() != "NotFound" || cri[1].Code() != "Unavailable" {
		t.Errorf("CRIErrors = %+v (a warning is not an error; rlimit is not a CRI call)", cri)
	}
	if (kubelethost.LogEntry{Raw: "no status"}).Code() != "" {
		t.Error("Code of an entry without a gRPC status is not empty")
	}
	pleg := kubelethost.PLEGUnhealthy(entries)
	if len(pleg) != 1 || !strings.Contains(pleg[0].Err, "last seen active") {
		t.Errorf("PLEGUnhealthy = %+v, want only the entry past the threshold", pleg)
	}
}
