package shim_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/crishim/shim"
)

// heldBackend is crisim behaving as containerd does with a call its client
// abandoned: a held method waits for release, whatever its caller does,
// and then completes.
type heldBackend struct {
	endpoint string
	rt       runtimeapi.RuntimeServiceClient // straight to the backend

	mu       sync.Mutex
	held     map[string]chan struct{} // method -> release
	arrived  chan string              // a held call reached the backend
	answered chan string              // a held call was answered
	calls    map[string]int
	// drop, when set, says which events the backend does not send.
	drop func(*runtimeapi.ContainerEventResponse) bool
}

// droppingStream is a server stream that does not send the events its
// backend drops.
type droppingStream struct {
	grpc.ServerStream
	b *heldBackend
}

func (s droppingStream) SendMsg(m any) error {
	if ev, ok := m.(*runtimeapi.ContainerEventResponse); ok {
		s.b.mu.Lock()
		drop := s.b.drop
		s.b.mu.Unlock()
		if drop != nil && drop(ev) {
			return nil
		}
	}
	return s.ServerStream.SendMsg(m)
}

func startHeldBackend(t *testing.T, held ...string) *heldBackend {
	t.Helper()
	rt, err := crisim.New(crisim.WithImage("busybox:1.36", 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	b := &heldBackend{held: map[string]chan struct{}{}, arrived: make(chan string, 16), answered: make(chan string, 16), calls: map[string]int{}}
	for _, m := range held {
		b.held[m] = make(chan struct{})
	}
	intercept := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
		b.mu.Lock()
		b.calls[method]++
		release, ok := b.held[method]
		b.mu.Unlock()
		if !ok {
			return h(ctx, req)
		}
		b.arrived <- method
		<-release
		resp, err := h(context.WithoutCancel(ctx), req)
		b.answered <- method
		return resp, err
	}
	sock := filepath.Join(t.TempDir(), "backend.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.UnaryInterceptor(intercept),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, droppingStream{ss, b})
		}))
	rt.Register(gs)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(l) }()
	b.endpoint = "unix://" + sock
	conn, err := grpc.NewClient(b.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	b.rt = runtimeapi.NewRuntimeServiceClient(conn)
	t.Cleanup(func() {
		b.releaseAll()
		_ = conn.Close()
		_ = rt.Close()
		gs.Stop()
		<-done
	})
	return b
}

func (b *heldBackend) release(method string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.held[method]; ok {
		close(c)
		delete(b.held, method)
	}
}

func (b *heldBackend) releaseAll() {
	b.mu.Lock()
	var ms []string
	for m := range b.held {
		ms = append(ms, m)
	}
	b.mu.Unlock()
	for _, m := range ms {
		b.release(m)
	}
}

func (b *heldBackend) count(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[method]
}

// wantCalls reports a test error unless the backend got n calls of
// method; why, appended to the message, says what n stands for.
func (b *heldBackend) wantCalls(t *testing.T, method string, n int, why string) bool {
	t.Helper()
	if got := b.count(method); got != n {
		t.Errorf("the runtime got %d %s calls, want %d%s", got, method, n, why)
		return false
	}
	return true
}

// sandboxes lists the backend's sandboxes, bypassing the shim.
func (b *heldBackend) sandboxes(t *testing.T) []*runtimeapi.PodSandbox {
	t.Helper()
	resp, err := b.rt.ListPodSandbox(ctxT(t), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetItems()
}

// wantOnlySandbox reports a test error unless id is the backend's one
// sandbox.
func (b *heldBackend) wantOnlySandbox(t *testing.T, id string) bool {
	t.Helper()
	if got := b.sandboxes(t); len(got) != 1 || got[0].Id != id {
		t.Errorf("the runtime's sandboxes: %v, want only %s", got, id)
		return false
	}
	return true
}

func (b *heldBackend) containers(t *testing.T) []*runtimeapi.Container {
	t.Helper()
	resp, err := b.rt.ListContainers(ctxT(t), &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetContainers()
}

// A CreateContainer whose caller gives up while the runtime has it, and
// which the runtime completes anyway (containerd on a slow disk), leaves no
// container: the caller was told it failed and creates it again, and the
// pod must end with one. Before the shim undid such a container, the
// runtime kept it and the retry made a second one.
func TestCreateContainerAnsweredAfterCallerGaveUpIsUndone(t *testing.T) {
	for _, async := range []bool{false, true} {
		name := "sync"
		if async {
			name = "async"
		}
		t.Run(name, func(t *testing.T) {
			b := startHeldBackend(t, "CreateContainer")
			sv := serve(t, b.endpoint, shim.Config{AsyncRunPodSandbox: async})
			ctx := ctxT(t)
			sb, err := sv.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web")})
			if err != nil {
				t.Fatal(err)
			}
			req := &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: containerConfig("app"), SandboxConfig: sandboxConfig("web")}

			cctx, cancel := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() {
				_, err := sv.rt.CreateContainer(cctx, req)
				errc <- err
			}()
			<-b.arrived
			cancel()
			if err := <-errc; status.Code(err) != codes.Canceled {
				t.Fatalf("CreateContainer whose caller gave up: %v, want Canceled", err)
			}
			eventually(t, "the shim to see its caller gone", func() bool { return sv.shim.Stats().AbandonedCreates == 1 })
			b.release("CreateContainer")
			<-b.answered
			// The runtime created it; the shim removes it and never lists it.
			eventually(t, "the late container to be removed", func() bool { return len(b.containers(t)) == 0 })
			cs, err := sv.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			if err != nil || len(cs.GetContainers()) != 0 {
				t.Fatalf("ListContainers after the late create was undone: %v %v", cs, err)
			}

			// The caller's retry, with the same attempt, is the one container.
			c, err := sv.rt.CreateContainer(ctx, req)
			if err != nil {
				t.Fatalf("CreateContainer retried: %v", err)
			}
			cs, err = sv.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			if err != nil || len(cs.GetContainers()) != 1 || cs.Containers[0].Id != c.ContainerId {
				t.Fatalf("ListContainers after the retry: %v %v, want only %s", cs, err, c.ContainerId)
			}
			if got := b.containers(t); len(got) != 1 || got[0].Id != c.ContainerId {
				t.Fatalf("the runtime's containers after the retry: %v, want only %s", got, c.ContainerId)
			}
			if st := sv.shim.Stats(); st.LateCreatesUndone != 1 || st.AbandonedCreates != 0 {
				t.Errorf("Stats %+v, want 1 late create undone and none abandoned", st)
			}
		})
	}
}

// In async mode a CreateContainer waiting for its sandbox whose caller gives
// up is never sent, even once the sandbox exists.
func TestCreateContainerWaitingForSandboxNotSentAfterCallerGaveUp(t *testing.T) {
	b, sv, sbID := heldAsyncSandbox(t)
	ctx := ctxT(t)
	req := &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: containerConfig("app"), SandboxConfig: sandboxConfig("web")}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := sv.rt.CreateContainer(cctx, req); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("CreateContainer waiting for a held sandbox: %v, want DeadlineExceeded", err)
	}
	b.release("RunPodSandbox")
	<-b.answered
	// The next call waits for the same sandbox: once it is answered, the
	// abandoned one has had every chance to be sent.
	c, err := sv.rt.CreateContainer(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.count("CreateContainer"); n != 1 {
		t.Errorf("the runtime got %d CreateContainer calls, want 1 (the abandoned one is not sent)", n)
	}
	if got := b.containers(t); len(got) != 1 || got[0].Id != c.ContainerId {
		t.Errorf("the runtime's containers: %v, want only %s", got, c.ContainerId)
	}
}

// A call waiting for a sandbox still being created gives up before its
// caller's deadline, leaving part of it for the call itself, instead of
// being sent with no time left for the runtime to answer.
func TestSandboxWaitLeavesTimeForTheCall(t *testing.T) {
	b, sv, sbID := heldAsyncSandbox(t)
	defer b.release("RunPodSandbox") // before the shim drains
	// The shim keeps a quarter of the caller's 8 s: it answers at 6 s,
	// 2 s before the caller's deadline, margin for a loaded machine.
	cctx, cancel := context.WithTimeout(ctxT(t), 8*time.Second)
	defer cancel()
	_, err := sv.rt.CreateContainer(cctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: containerConfig("app"), SandboxConfig: sandboxConfig("web")})
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(status.Convert(err).Message(), "still being created") {
		t.Fatalf("CreateContainer waiting for a held sandbox: %v, want the shim's DeadlineExceeded before the caller's", err)
	}
	if cctx.Err() != nil {
		t.Errorf("the shim answered once the caller's deadline had passed: %v", cctx.Err())
	}
	if n := b.count("CreateContainer"); n != 0 {
		t.Errorf("the runtime got %d CreateContainer calls, want 0", n)
	}
}

// A read after a mutation whose event never comes waits Config.WriteWait
// for it, then gets the mutation's effect from the view's status call, and
// Stats says so.
func TestStatsUnseenWrite(t *testing.T) {
	b := startHeldBackend(t)
	b.drop = func(ev *runtimeapi.ContainerEventResponse) bool {
		return ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT && ev.GetContainerId() != ev.GetPodSandboxStatus().GetId()
	}
	sv := serve(t, b.endpoint, shim.Config{RelistPeriod: time.Hour, WriteWait: 50 * time.Millisecond})
	eventually(t, "the shim following the view's events", func() bool { return sv.shim.View().Stats().Subscribers == ownSubscribers })
	ctx := ctxT(t)
	_, cID := startPod(t, sv, "web")
	cs, err := sv.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(cs.GetContainers()) != 1 || cs.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ListContainers after a StartContainer whose event was lost: %v %v, want %s running", cs, err, cID)
	}
	st := sv.shim.Stats()
	if st.WriteWaits < 1 || st.WriteWaitTimeouts != 1 || st.UnseenWrites["StartContainer"] != 1 || len(st.UnseenWrites) != 1 {
		t.Errorf("Stats %+v, want one read that waited all of WriteWait, for a StartContainer", st)
	}
	if st.WriteWaitMax < 50*time.Millisecond {
		t.Errorf("WriteWaitMax %v, want at least the WriteWait", st.WriteWaitMax)
	}
}

// heldAsyncSandbox serves an async shim over a backend that holds every
// RunPodSandbox, and returns the shim's id of a sandbox whose real call has
// reached the backend and is held there.
func heldAsyncSandbox(t *testing.T) (*heldBackend, *served, string) {
	t.Helper()
	b := startHeldBackend(t, "RunPodSandbox")
	sv := serve(t, b.endpoint, shim.Config{AsyncRunPodSandbox: true})
	sb, err := sv.rt.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web")})
	if err != nil {
		t.Fatal(err)
	}
	<-b.arrived
	return b, sv, sb.PodSandboxId
}
