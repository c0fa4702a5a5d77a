package provider

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// notifier delivers pod statuses to virtual-kubelet's callback from one
// goroutine, outside every lock. Pending statuses are kept per pod, latest
// wins, so a slow callback never blocks a publisher and never sees an
// older status after a newer one.
type notifier struct {
	mu      sync.Mutex
	cb      func(*corev1.Pod)
	stopCB  func() bool
	pending map[string]*corev1.Pod
	order   []string
	signal  chan struct{}
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newNotifier() *notifier {
	n := &notifier{
		pending: map[string]*corev1.Pod{},
		signal:  make(chan struct{}, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go n.run()
	return n
}

// setCallback installs cb until ctx ends.
func (n *notifier) setCallback(ctx context.Context, cb func(*corev1.Pod)) {
	n.mu.Lock()
	if n.stopCB != nil {
		n.stopCB()
	}
	n.cb = cb
	n.stopCB = context.AfterFunc(ctx, func() {
		n.mu.Lock()
		n.cb = nil
		n.mu.Unlock()
	})
	n.mu.Unlock()
	n.poke()
}

// enqueue queues pod (which the caller no longer changes) for delivery.
// key is the pod UID: the terminal status of a deleted pod is not replaced
// by the first status of a new pod with the same name.
func (n *notifier) enqueue(key string, pod *corev1.Pod) {
	n.mu.Lock()
	if _, ok := n.pending[key]; !ok {
		n.order = append(n.order, key)
	}
	n.pending[key] = pod
	n.mu.Unlock()
	n.poke()
}

func (n *notifier) poke() {
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.quit:
			return
		case <-n.signal:
		}
		for {
			n.mu.Lock()
			cb := n.cb
			if cb == nil || len(n.order) == 0 {
				n.mu.Unlock()
				break
			}
			key := n.order[0]
			n.order = n.order[1:]
			pod := n.pending[key]
			delete(n.pending, key)
			n.mu.Unlock()
			cb(pod.DeepCopy())
		}
	}
}

// close stops the goroutine and waits for it; pending statuses are dropped.
func (n *notifier) close() {
	n.once.Do(func() {
		close(n.quit)
		<-n.done
		n.mu.Lock()
		if n.stopCB != nil {
			n.stopCB()
		}
		n.cb = nil
		n.mu.Unlock()
	})
}

// pendingLen is how many pods have a status waiting for the callback.
func (n *notifier) pendingLen() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.pending)
}
