package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// backgroundPuller is a minimal non-blocking image gate: one pull per image
// however many pods want it, at most maxParallel at once, and every waiting
// pod woken when it ends. Failed pulls back off per image. It is the
// stand-in used when no asyncpull scheduler is configured.
type backgroundPuller struct {
	img     cri.ImageManagerService
	clock   clock.PassiveClock
	wake    func(types.UID)
	obs     func(image string, d time.Duration, err error)
	backoff time.Duration
	sem     chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	images  map[string]*imagePull
}

type imagePull struct {
	present  bool
	pulling  bool
	err      error
	failedAt time.Time
	waiters  map[types.UID]bool
}

func newBackgroundPuller(img cri.ImageManagerService, clk clock.PassiveClock, maxParallel int, backoff time.Duration,
	wake func(types.UID), obs func(string, time.Duration, error)) *backgroundPuller {
	if maxParallel <= 0 {
		maxParallel = 10
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &backgroundPuller{img: img, clock: clk, wake: wake, obs: obs, backoff: backoff,
		sem: make(chan struct{}, maxParallel), ctx: ctx, cancel: cancel, images: map[string]*imagePull{}}
}

func (p *backgroundPuller) ensure(_ context.Context, uid types.UID, image string, sb *runtimeapi.PodSandboxConfig) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ip, ok := p.images[image]
	if !ok {
		ip = &imagePull{waiters: map[types.UID]bool{}}
		p.images[image] = ip
	}
	if ip.present {
		return true, nil
	}
	ip.waiters[uid] = true
	if ip.pulling {
		return false, nil
	}
	if ip.err != nil && p.clock.Since(ip.failedAt) < p.backoff {
		return false, fmt.Errorf("ImagePullBackOff: %s: %w", image, ip.err)
	}
	if p.ctx.Err() != nil {
		return false, p.ctx.Err()
	}
	ip.pulling = true
	p.wg.Add(1)
	go p.pull(image, ip, sb)
	return false, nil
}

func (p *backgroundPuller) pull(image string, ip *imagePull, sb *runtimeapi.PodSandboxConfig) {
	defer p.wg.Done()
	select {
	case p.sem <- struct{}{}:
	case <-p.ctx.Done():
		return
	}
	defer func() { <-p.sem }()
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image}
	var err error
	var pulled bool
	start := p.clock.Now()
	st, err := p.img.ImageStatus(p.ctx, spec, false)
	if err == nil && st.GetImage() == nil {
		pulled = true
		_, err = p.img.PullImage(p.ctx, spec, nil, sb)
	}
	if pulled && p.obs != nil {
		p.obs(image, p.clock.Since(start), err)
	}
	p.mu.Lock()
	ip.pulling = false
	if err != nil {
		ip.err = fmt.Errorf("%w: %w", ErrImagePull, err)
		ip.failedAt = p.clock.Now()
	} else {
		ip.present, ip.err = true, nil
	}
	waiters := ip.waiters
	ip.waiters = map[types.UID]bool{}
	p.mu.Unlock()
	for uid := range waiters {
		p.wake(uid)
	}
}

func (p *backgroundPuller) inFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ip := range p.images {
		if ip.pulling {
			n++
		}
	}
	return n
}

func (p *backgroundPuller) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ip := range p.images {
		delete(ip.waiters, uid)
	}
}

func (p *backgroundPuller) close() {
	p.cancel()
	p.wg.Wait()
}
