package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/asyncpull"
)

// errImagePull is matched by pull failures reported to a pod.
var errImagePull = errors.New("ErrImagePull")

// imageGate answers "is this image on the node?" without blocking: a
// missing image is pulled in the background and the pod is woken when the
// pull ends. Implemented by the asyncpull adapter and by the baseline's
// blocking puller (which simply blocks).
type imageGate interface {
	// ensure reports whether image is present. When it is not, a pull is
	// started (or joined) and wake(uid) is called when it ends; err is the
	// last failure while the image is in pull back-off. Queued pulls of a
	// higher priority start first (see pullPriority).
	ensure(ctx context.Context, uid types.UID, image string, priority int32, sb *runtimeapi.PodSandboxConfig) (ready bool, err error)
	// prefetch starts the pulls of pod's missing images the moment the
	// pod is known, ahead of its sandbox, where pulls do not block (they
	// are the long pole of a start); the blocking puller pulls in the sync.
	prefetch(ctx context.Context, pod *corev1.Pod, sb *runtimeapi.PodSandboxConfig)
	// inFlight is the number of pulls running or queued.
	inFlight() int
	// forget drops uid's interest in its pulls (the pod was deleted).
	forget(uid types.UID)
	close()
}

// pullAuthFunc is the registry credential of a pod's pull of image (nil:
// anonymous); known is false when pod (nil: not at hand) has pull
// secrets not read yet.
type pullAuthFunc func(pod *corev1.Pod, uid types.UID, image string) (auth *runtimeapi.AuthConfig, known bool)

// blockingPuller is today's kubelet image manager with serialized pulls:
// the worker asks the runtime, then pulls and waits; one pull at a time
// node-wide (serializeImagePulls=true, the default).
type blockingPuller struct {
	runtime *runtimeLayer
	clock   clock.PassiveClock
	obs     func(image string, d time.Duration, err error) // called after each pull
	auth    pullAuthFunc

	serial   sync.Mutex
	mu       sync.Mutex
	inflight int
}

func (p *blockingPuller) ensure(ctx context.Context, uid types.UID, image string, _ int32, sb *runtimeapi.PodSandboxConfig) (bool, error) {
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image}
	st, err := p.runtime.imageStatus(ctx, spec)
	if err != nil {
		return false, &pullError{Reason: reasonImageInspectError, Image: image, Err: err}
	}
	if st.GetImage() != nil {
		return true, nil
	}
	p.mu.Lock()
	p.inflight++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inflight--
		p.mu.Unlock()
	}()
	p.serial.Lock()
	defer p.serial.Unlock()
	start := p.clock.Now()
	auth, _ := p.auth(nil, uid, image)
	_, err = p.runtime.pullImage(ctx, spec, auth, sb)
	if p.obs != nil {
		p.obs(image, p.clock.Since(start), err)
	}
	if err != nil {
		return false, &pullError{Reason: asyncpull.ReasonErrImagePull, Image: image, Err: err}
	}
	return true, nil
}

func (p *blockingPuller) inFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight
}

func (p *blockingPuller) prefetch(context.Context, *corev1.Pod, *runtimeapi.PodSandboxConfig) {}
func (p *blockingPuller) forget(types.UID)                                                    {}
func (p *blockingPuller) close()                                                              {}
