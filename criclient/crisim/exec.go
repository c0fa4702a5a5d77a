package crisim

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ExecHandler plays the process that ExecSync runs in a running container:
// it is given the container's id and the command, and returns what the
// process wrote and its exit code. It must return soon after ctx ends
// (ExecSync's timeout passed, the call was abandoned or the runtime
// closed); ExecSync waits for it. A non-nil err fails the call: a gRPC
// status error keeps its code over the wire, any other error is
// codes.Unknown, as a runtime failure is.
type ExecHandler func(ctx context.Context, containerID string, cmd []string) (stdout, stderr []byte, exitCode int32, err error)

// SetExecHandler sets what ExecSync runs; nil restores the default, a
// command that exits 0 at once with no output. It may be called at any
// time; calls already running keep the handler they started with. It fails
// only on a Runtime that New did not make.
func (r *Runtime) SetExecHandler(h ExecHandler) error {
	if !r.ready() {
		return errNotNew("SetExecHandler")
	}
	if h == nil {
		r.execHandler.Store(nil)
		return nil
	}
	r.execHandler.Store(&h)
	return nil
}

func defaultExec(context.Context, string, []string) ([]byte, []byte, int32, error) {
	return nil, nil, 0, nil
}

type execResult struct {
	stdout, stderr []byte
	code           int32
	err            error
}

// ExecSync runs cmd in a running container through the ExecHandler and
// returns its output and exit code, as containerd does: an unknown
// container gives codes.NotFound, one that is not running
// codes.FailedPrecondition ("container is in CONTAINER_EXITED state"), an
// empty command codes.InvalidArgument. A positive Timeout (seconds, on the
// runtime clock) that passes before the handler returns ends the handler's
// ctx and gives codes.DeadlineExceeded ("timeout 1s exceeded"), as
// containerd reports an exec it had to kill. The call's latency
// (WithLatency) comes before the command runs; the container's exit does
// not end a command already running.
func (r *Runtime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	const method = "ExecSync"
	return serve(ctx, r, method, kindRead, func() (*runtimeapi.ExecSyncResponse, error) {
		id := req.GetContainerId()
		if id == "" {
			return nil, errInvalid(method, "container_id is empty")
		}
		cmd := req.GetCmd()
		if len(cmd) == 0 {
			return nil, errInvalid(method, "cmd is empty")
		}
		if req.GetTimeout() < 0 {
			return nil, errInvalid(method, "timeout %d is negative", req.GetTimeout())
		}
		r.mu.RLock()
		c := r.containers[id]
		var st runtimeapi.ContainerState
		if c != nil {
			st = c.state
		}
		r.mu.RUnlock()
		if c == nil {
			return nil, errNotFound(method, "failed to find container %q in store", id)
		}
		if st != runtimeapi.ContainerState_CONTAINER_RUNNING {
			return nil, errPrecondition(method, "container is in %s state", st)
		}
		h := ExecHandler(defaultExec)
		if p := r.execHandler.Load(); p != nil {
			h = *p
		}
		// The timer is armed before the command runs, so a test on a fake
		// clock that sees the handler running can step past the timeout.
		var expired <-chan time.Time
		timeout := time.Duration(req.GetTimeout()) * time.Second
		if timeout > 0 {
			t := r.clock.NewTimer(timeout)
			defer t.Stop()
			expired = t.C()
		}
		hctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan execResult, 1)
		args := append([]string(nil), cmd...)
		go func() {
			var res execResult
			res.stdout, res.stderr, res.code, res.err = h(hctx, id, args)
			done <- res
		}()
		var res execResult
		var fail error
		select {
		case res = <-done:
		case <-expired:
			fail = newError(method, context.DeadlineExceeded, codes.DeadlineExceeded, "timeout %v exceeded", timeout)
		case <-ctx.Done():
			fail = contextError(method, ctx.Err())
		case <-r.done:
			fail = errClosed(method)
		}
		if fail != nil {
			cancel()
			<-done // the process is killed and reaped before the call returns
			return nil, fail
		}
		if res.err != nil {
			if _, ok := status.FromError(res.err); ok {
				return nil, res.err
			}
			return nil, newError(method, res.err, codes.Unknown, "exec in container %q: %v", id, res.err)
		}
		return &runtimeapi.ExecSyncResponse{Stdout: res.stdout, Stderr: res.stderr, ExitCode: res.code}, nil
	})
}
