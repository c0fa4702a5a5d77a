package shim

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// SocketMode is the permission of the shim's socket: owner and group may
// connect, nobody else.
const SocketMode = 0o660

// unixTarget turns "unix:///p" or "/p" into a gRPC target.
func unixTarget(endpoint string) (string, error) {
	p, err := SocketPath(endpoint)
	if err != nil {
		return "", err
	}
	return "unix://" + p, nil
}

// SocketPath returns the file of a "unix:///abs/path" (or "/abs/path")
// endpoint.
func SocketPath(endpoint string) (string, error) {
	p := strings.TrimPrefix(endpoint, "unix://")
	if p == "" || !filepath.IsAbs(p) || strings.Contains(p, "://") {
		return "", fmt.Errorf("crishim: endpoint %q: want unix:///absolute/path", endpoint)
	}
	return p, nil
}

// Listen creates the unix socket of endpoint with SocketMode, creating its
// directory (0750) and replacing a stale socket file left by a previous run.
// It refuses to replace a socket something still answers on, or a file
// that is not a socket.
func Listen(endpoint string) (net.Listener, error) {
	p, err := SocketPath(endpoint)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return nil, fmt.Errorf("crishim: listen %s: %w", p, err)
	}
	if fi, err := os.Lstat(p); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("crishim: listen %s: exists and is not a socket", p)
		}
		if c, err := net.Dial("unix", p); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("crishim: listen %s: another server answers on it", p)
		}
		if err := os.Remove(p); err != nil {
			return nil, fmt.Errorf("crishim: listen %s: removing stale socket: %w", p, err)
		}
	}
	// Create the socket with no permission for others from the start.
	old := syscall.Umask(0o117)
	l, err := net.Listen("unix", p)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("crishim: listen %s: %w", p, err)
	}
	if err := os.Chmod(p, SocketMode); err != nil {
		return nil, errors.Join(fmt.Errorf("crishim: chmod %s: %w", p, err), l.Close())
	}
	return l, nil
}
