package provider

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cri-client/pkg/logs"
)

// GetContainerLogs streams a container's log (kubectl logs) from the CRI
// log file the runtime writes for it: the file the agent names under
// WithPodLogDir, which ContainerStatus reports as its log path. It is read
// as the kubelet reads it, with k8s.io/cri-client's parser of the CRI log
// format (stdout and stderr lines interleaved as written):
//
//   - Tail keeps the last Tail lines of the file (0: every line;
//     virtual-kubelet gives no way to ask for none); as the kubelet's, a
//     long line the runtime wrote in parts counts once per part;
//   - SinceSeconds and SinceTime skip the lines written before;
//   - Timestamps prefixes each line with its RFC 3339 time;
//   - LimitBytes stops after that many bytes;
//   - Previous reads the container's previous instance (its last
//     termination), if the runtime still has it;
//   - Follow keeps streaming new lines until the container stops, the
//     request ends or the reader is closed.
//
// A pod or container the provider does not know, or a container that has
// not been created yet, is errdefs.NotFound; a container without a log
// file (no WithPodLogDir) is errdefs.InvalidInput. Closing the returned
// reader ends the stream and waits for its reader goroutine.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	if ctx == nil {
		return nil, errdefs.InvalidInput("GetContainerLogs: ctx must not be nil")
	}
	if err := p.open(); err != nil {
		return nil, err
	}
	id, err := p.containerID(ctx, namespace, podName, containerName, opts.Previous)
	if err != nil {
		return nil, err
	}
	st, err := p.rt.ContainerStatus(ctx, id, false)
	if err != nil {
		return nil, fmt.Errorf("GetContainerLogs %s/%s/%s: container status: %w", namespace, podName, containerName, err)
	}
	path := st.GetStatus().GetLogPath()
	if path == "" {
		return nil, errdefs.InvalidInputf("GetContainerLogs %s/%s/%s: the container has no log file (the node runs without a pod log directory)",
			namespace, podName, containerName)
	}
	lo := logOptions(opts, p.cfg.clock.Now())
	ctx, cancel := context.WithCancel(ctx)
	r, w := io.Pipe()
	s := &logStream{r: r, cancel: cancel}
	s.wg.Go(func() {
		// stdout and stderr go to one stream, as the kubelet serves them;
		// ReadLogs writes from this goroutine only.
		err := logs.ReadLogs(ctx, path, id, lo, p.rt, w, w)
		_ = w.CloseWithError(err)
	})
	return s, nil
}

// logOptions are the CRI log reader's options for virtual-kubelet's, at
// time now (for SinceSeconds).
func logOptions(o api.ContainerLogOpts, now time.Time) *logs.LogOptions {
	lo := &logs.LogOptions{Follow: o.Follow, Timestamp: o.Timestamps}
	if o.Tail > 0 {
		n := int64(o.Tail)
		lo.TailLines = &n
	}
	if o.LimitBytes > 0 {
		n := int64(o.LimitBytes)
		lo.LimitBytes = &n
	}
	switch {
	case o.SinceSeconds > 0:
		lo.Since = now.Add(-time.Duration(o.SinceSeconds) * time.Second)
	case !o.SinceTime.IsZero():
		lo.Since = o.SinceTime
	}
	return lo
}

// logStream is a container's log being read into a pipe.
type logStream struct {
	r      *io.PipeReader
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

func (s *logStream) Read(b []byte) (int, error) { return s.r.Read(b) }

// Close ends the read and waits for the reader goroutine.
func (s *logStream) Close() error {
	s.once.Do(func() {
		s.cancel()
		_ = s.r.Close()
		s.wg.Wait()
	})
	return nil
}

// containerID is the CRI ID of the pod's container named name (an init
// container too): its current instance, or with previous the one before.
func (p *Provider) containerID(ctx context.Context, namespace, podName, name string, previous bool) (string, error) {
	pod, err := p.GetPod(ctx, namespace, podName)
	if err != nil {
		return "", err
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, cs := range list {
			if cs.Name != name {
				continue
			}
			id := cs.ContainerID
			if previous {
				id = ""
				if t := cs.LastTerminationState.Terminated; t != nil {
					id = t.ContainerID
				}
				if id == "" {
					return "", errdefs.NotFoundf("container %q in pod %s/%s has no previous instance", name, namespace, podName)
				}
			}
			if id == "" {
				return "", errdefs.NotFoundf("container %q in pod %s/%s is not created yet", name, namespace, podName)
			}
			return bareID(id), nil
		}
	}
	return "", errdefs.NotFoundf("container %q is not in pod %s/%s", name, namespace, podName)
}

// open is ErrClosed after Close.
func (p *Provider) open() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	return nil
}

// bareID is a container ID without its runtime's scheme ("containerd://").
func bareID(id string) string {
	if _, bare, ok := strings.Cut(id, "://"); ok {
		return bare
	}
	return id
}
