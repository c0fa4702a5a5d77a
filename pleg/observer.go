package pleg

import (
	"sync"
	"time"
)

// Observer is told what the PLEG does. Its methods are called one at a
// time, in order, from a PLEG goroutine, never under a PLEG lock; they must
// not block for long (they delay later notifications, not the PLEG).
// Embed NopObserver to implement only some methods.
type Observer interface {
	// ModeChanged: the PLEG went from one mode to another; cause is the
	// stream error for a fall back to relisting, nil otherwise.
	ModeChanged(from, to Mode, cause error)
	// EventDropped: ev did not fit in the Watch channel; a PodSync for its
	// pod will be delivered instead.
	EventDropped(ev Event)
	// Relisted: a relist (full, pod or probe) finished.
	Relisted(r RelistResult)
	// StreamError: the event stream failed; the PLEG reconnects after retryIn.
	StreamError(err error, retryIn time.Duration)
}

// RelistKind says what a RelistResult is about.
type RelistKind string

const (
	// RelistFull lists every sandbox and container.
	RelistFull RelistKind = "full"
	// RelistPods relists a few pods (RequestRelist, events without statuses,
	// retries of failed inspections in evented mode).
	RelistPods RelistKind = "pods"
	// RelistProbe is the evented mode's proof of life: one ListPodSandbox.
	RelistProbe RelistKind = "probe"
)

// RelistResult describes one finished relist.
type RelistResult struct {
	// Kind of relist.
	Kind RelistKind
	// Start is the relist timestamp (taken before listing).
	Start time.Time
	// Duration is how long it took.
	Duration time.Duration
	// Inspected is how many pods were inspected, Failed how many of those
	// inspections failed.
	Inspected, Failed int
	// Events is how many events it produced.
	Events int
	// Err is the listing error, if the relist failed.
	Err error
}

// NopObserver ignores everything.
type NopObserver struct{}

// ModeChanged does nothing.
func (NopObserver) ModeChanged(Mode, Mode, error) {}

// EventDropped does nothing.
func (NopObserver) EventDropped(Event) {}

// Relisted does nothing.
func (NopObserver) Relisted(RelistResult) {}

// StreamError does nothing.
func (NopObserver) StreamError(error, time.Duration) {}

var _ Observer = NopObserver{}

// notifier runs observer calls in order on its own goroutine, so the PLEG
// never calls user code under a lock and never waits for it.
type notifier struct {
	mu    sync.Mutex
	queue []func()
	wake  chan struct{}
}

func newNotifier() *notifier {
	return &notifier{wake: make(chan struct{}, 1)}
}

func (n *notifier) post(f func()) {
	n.mu.Lock()
	n.queue = append(n.queue, f)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run delivers notifications until done is closed, then delivers what is
// left and returns.
func (n *notifier) run(done <-chan struct{}) {
	for {
		select {
		case <-n.wake:
			n.drain()
		case <-done:
			n.drain()
			return
		}
	}
}

func (n *notifier) drain() {
	for {
		n.mu.Lock()
		q := n.queue
		n.queue = nil
		n.mu.Unlock()
		if len(q) == 0 {
			return
		}
		for _, f := range q {
			f()
		}
	}
}
