package shim_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/syncpod/syncpod/examples/crishim/shim"
)

// runAbandoned makes a RunPodSandbox of each config that the backend,
// which must hold RunPodSandbox, has when the caller cancels it; it
// returns once every caller got CANCELED and the shim has seen them gone
// (the client's answer comes before the shim learns of the cancel: a call
// answered in between would count as answered).
func runAbandoned(t *testing.T, b *heldBackend, sv *served, cfgs ...*runtimeapi.PodSandboxConfig) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	errc := make(chan error, len(cfgs))
	for _, cfg := range cfgs {
		go func() {
			_, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
			errc <- err
		}()
		select {
		case <-b.arrived:
		case err := <-errc:
			t.Fatalf("RunPodSandbox answered before it reached the runtime: %v", err)
		}
	}
	cancel()
	for range cfgs {
		if err := <-errc; status.Code(err) != codes.Canceled {
			t.Fatalf("RunPodSandbox whose caller gave up: %v, want Canceled", err)
		}
	}
	eventually(t, "the shim to see its callers gone", func() bool { return sv.shim.Stats().AbandonedSandboxes == len(cfgs) })
}

// A RunPodSandbox whose caller's deadline passes while the runtime has it
// (containerd frozen) and which the runtime completes anyway leaves one
// sandbox, which the kubelet's retry with the same metadata gets. Directly
// on the runtime the retry fails, the name being reserved by the late
// sandbox, and the kubelet backs off before it finds that sandbox.
func TestRunPodSandboxRetryGetsLateSandbox(t *testing.T) {
	b := startHeldBackend(t, "RunPodSandbox")
	sv := serve(t, b.endpoint, shim.Config{})
	ctx := ctxT(t)
	req := &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web")}
	// Long enough for the call to reach the runtime on a loaded machine.
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := sv.rt.RunPodSandbox(dctx, req)
		errc <- err
	}()
	select {
	case <-b.arrived:
	case err := <-errc:
		t.Fatalf("RunPodSandbox answered before it reached the runtime: %v", err)
	}
	if err := <-errc; status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("RunPodSandbox past its caller's deadline: %v, want DeadlineExceeded", err)
	}
	// The shim's deadline passes a moment after its client's.
	eventually(t, "the shim to see its caller gone", func() bool { return sv.shim.Stats().AbandonedSandboxes == 1 })
	b.release("RunPodSandbox")
	<-b.answered

	resp, err := sv.rt.RunPodSandbox(ctx, req)
	if err != nil {
		t.Fatalf("the retry of a sandbox the runtime created late: %v", err)
	}
	if !b.wantOnlySandbox(t, resp.PodSandboxId) {
		t.FailNow()
	}
	b.wantCalls(t, "RunPodSandbox", 1, "")
	pods, err := sv.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.GetItems()) != 1 || pods.Items[0].Id != resp.PodSandboxId {
		t.Fatalf("ListPodSandbox after the retry: %v %v, want only %s", pods, err, resp.PodSandboxId)
	}
	if st := sv.shim.Stats(); st.SandboxRetriesJoined != 1 || st.LateSandboxes != 0 || st.AbandonedSandboxes != 0 {
		t.Errorf("Stats %+v, want 1 retry joined and no sandbox kept or abandoned", st)
	}
}

// A second RunPodSandbox of the same sandbox while the runtime has the
// first joins it: one runtime call, one answer for both. Once a caller
// has the answer nothing is kept: a third call is the runtime's.
func TestRunPodSandboxConcurrentSameKeyJoins(t *testing.T) {
	b := startHeldBackend(t, "RunPodSandbox")
	sv := serve(t, b.endpoint, shim.Config{})
	ctx := ctxT(t)
	req := &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web")}
	type answer struct {
		id  string
		err error
	}
	answers := make(chan answer, 2)
	call := func() {
		resp, err := sv.rt.RunPodSandbox(ctx, req)
		answers <- answer{resp.GetPodSandboxId(), err}
	}
	go call()
	<-b.arrived
	go call()
	eventually(t, "the second call to join the first", func() bool { return sv.shim.Stats().SandboxRetriesJoined == 1 })
	b.release("RunPodSandbox")
	first, second := <-answers, <-answers
	if first.err != nil || second.err != nil || first.id == "" || first.id != second.id {
		t.Fatalf("the two calls got %+v and %+v, want the same sandbox", first, second)
	}
	b.wantCalls(t, "RunPodSandbox", 1, "")
	if st := sv.shim.Stats(); st.LateSandboxes != 0 {
		t.Errorf("Stats %+v, want no sandbox kept: its callers had it", st)
	}
	if _, err := sv.rt.RunPodSandbox(ctx, req); status.Code(err) != codes.AlreadyExists {
		t.Errorf("a third call once both had the answer: %v, want the runtime's AlreadyExists", err)
	}
	b.wantCalls(t, "RunPodSandbox", 2, "")
}

// A call with the same metadata but another config or runtime handler
// asks for another sandbox: it is the runtime's to answer, and the late
// sandbox stays kept for the retry that matches it.
func TestRunPodSandboxOtherConfigForwarded(t *testing.T) {
	b := startHeldBackend(t, "RunPodSandbox")
	sv := serve(t, b.endpoint, shim.Config{})
	ctx := ctxT(t)
	runAbandoned(t, b, sv, sandboxConfig("web"))
	b.release("RunPodSandbox")
	<-b.answered

	changed := sandboxConfig("web")
	changed.Labels["app"] = "changed"
	if _, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: changed}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("RunPodSandbox with another config: %v, want the runtime's AlreadyExists", err)
	}
	if !b.wantCalls(t, "RunPodSandbox", 2, ": another config is forwarded") {
		t.FailNow()
	}
	if _, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web"), RuntimeHandler: "other"}); err == nil {
		t.Error("RunPodSandbox with another runtime handler succeeded next to the late sandbox")
	}
	if !b.wantCalls(t, "RunPodSandbox", 3, ": another runtime handler is forwarded") {
		t.FailNow()
	}

	resp, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web")})
	if err != nil {
		t.Fatalf("the retry with the first config: %v", err)
	}
	b.wantOnlySandbox(t, resp.PodSandboxId)
	b.wantCalls(t, "RunPodSandbox", 3, ": the matching retry is not sent")
}

// A late sandbox is kept for a bounded time: a retry within it gets the
// sandbox, one after it is forwarded (and the runtime answers it).
func TestRunPodSandboxLateSandboxExpires(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := startHeldBackend(t, "RunPodSandbox")
	sv := serve(t, b.endpoint, shim.Config{Clock: clk})
	ctx := ctxT(t)
	runAbandoned(t, b, sv, sandboxConfig("early"), sandboxConfig("late"))
	b.release("RunPodSandbox")
	eventually(t, "both late sandboxes to be kept", func() bool { return sv.shim.Stats().LateSandboxes == 2 })

	clk.Step(shim.LateSandboxKeep - time.Second)
	resp, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("early")})
	if err != nil || resp.GetPodSandboxId() == "" {
		t.Fatalf("a retry within the bound: %v %v, want the late sandbox", resp, err)
	}
	if !b.wantCalls(t, "RunPodSandbox", 2, ": the retry within the bound is not sent") {
		t.FailNow()
	}

	clk.Step(2 * time.Second)
	if st := sv.shim.Stats(); st.LateSandboxes != 0 {
		t.Errorf("Stats %+v past the bound, want no sandbox kept", st)
	}
	if _, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("late")}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("a retry past the bound: %v, want the runtime's AlreadyExists", err)
	}
	b.wantCalls(t, "RunPodSandbox", 3, ": the retry past the bound is forwarded")
}

// RemovePodSandbox of a late sandbox drops it: a retry gets a new sandbox
// from the runtime, not the removed one's id.
func TestRunPodSandboxLateSandboxRemoved(t *testing.T) {
	b := startHeldBackend(t, "RunPodSandbox")
	sv := serve(t, b.endpoint, shim.Config{})
	ctx := ctxT(t)
	runAbandoned(t, b, sv, sandboxConfig("web"))
	b.release("RunPodSandbox")
	eventually(t, "the late sandbox to be kept", func() bool { return sv.shim.Stats().LateSandboxes == 1 })
	got := b.sandboxes(t)
	if len(got) != 1 {
		t.Fatalf("the runtime's sandboxes: %v, want the late one", got)
	}
	late := got[0].Id
	if _, err := sv.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: late}); err != nil {
		t.Fatal(err)
	}
	if st := sv.shim.Stats(); st.LateSandboxes != 0 {
		t.Errorf("Stats %+v after the late sandbox was removed, want none kept", st)
	}
	resp, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.PodSandboxId == late {
		t.Errorf("the retry got the removed sandbox %s", late)
	}
	b.wantCalls(t, "RunPodSandbox", 2, ": the retry is forwarded")
	b.wantOnlySandbox(t, resp.PodSandboxId)
}
