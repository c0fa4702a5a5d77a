package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// process is one control-plane binary running in the control plane's
// directory, its output appended to a log file there.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process is reaped
	werr    error         // Wait's result, set before done closes
}

func startProcess(dir, name, bin string, args []string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// A test binary killed before its cleanups ran takes the process with
	// it; reapStale catches the rest.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrUnavailable, name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	_ = os.WriteFile(filepath.Join(dir, name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	go func() {
		p.werr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.werr
	default:
		return false, nil
	}
}

// stop sends SIGTERM, then SIGKILL after timeout, and waits until the
// process has been reaped.
func (p *process) stop(timeout time.Duration) {
	if ended, _ := p.exited(); ended {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}
