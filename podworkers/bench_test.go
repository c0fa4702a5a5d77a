package podworkers_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncpod/syncpod/podworkers"
)

// podRunner is what the benchmark drives: ours or the kubelet-shaped
// baseline.
type podRunner interface {
	update(p *corev1.Pod)
	wake(uid types.UID)
	idle() bool
	close()
}

// countSyncer does no work but count.
type countSyncer struct{ n atomic.Int64 }

func (s *countSyncer) SyncPod(context.Context, podworkers.UpdateType, *corev1.Pod) (podworkers.Result, error) {
	s.n.Add(1)
	return podworkers.Result{}, nil
}
func (s *countSyncer) SyncTerminatingPod(context.Context, *corev1.Pod, time.Duration) error {
	return nil
}
func (s *countSyncer) SyncTerminatedPod(context.Context, *corev1.Pod) error { return nil }
func (s *countSyncer) SyncTerminatingRuntimePod(context.Context, podworkers.RuntimePod, time.Duration) error {
	return nil
}

type ours struct{ w *podworkers.Workers }

func (o ours) update(p *corev1.Pod) {
	_ = o.w.Update(podworkers.PodUpdate{Type: podworkers.UpdateUpdate, Pod: p})
}
func (o ours) wake(uid types.UID) { o.w.Wake(uid) }
func (o ours) idle() bool {
	s := o.w.Stats()
	return s.Queued == 0 && s.Running == 0 && s.Goroutines == 0 // the pool has drained too
}
func (o ours) close() { _ = o.w.Close() }

// kubeletShaped is the kubelet's shape: one goroutine per pod, woken by a
// one-slot channel, the pending pod overwritten by each update.
type kubeletShaped struct {
	s       *countSyncer
	mu      sync.Mutex
	workers map[types.UID]*kWorker
	busy    atomic.Int64
	wg      sync.WaitGroup
	stop    chan struct{}
}

type kWorker struct {
	signal chan struct{}
	mu     sync.Mutex
	pod    *corev1.Pod
}

func newKubeletShaped(s *countSyncer) *kubeletShaped {
	return &kubeletShaped{s: s, workers: map[types.UID]*kWorker{}, stop: make(chan struct{})}
}

func (k *kubeletShaped) update(p *corev1.Pod) {
	k.mu.Lock()
	w := k.workers[p.UID]
	if w == nil {
		w = &kWorker{signal: make(chan struct{}, 1)}
		k.workers[p.UID] = w
		k.wg.Add(1)
		go k.run(w)
	}
	k.mu.Unlock()
	w.mu.Lock()
	w.pod = p
	w.mu.Unlock()
	k.signal(w)
}

func (k *kubeletShaped) signal(w *kWorker) {
	k.busy.Add(1)
	select {
	case w.signal <- struct{}{}:
	default:
		k.busy.Add(-1)
	}
}

func (k *kubeletShaped) wake(uid types.UID) {
	k.mu.Lock()
	w := k.workers[uid]
	k.mu.Unlock()
	if w != nil {
		k.signal(w)
	}
}

func (k *kubeletShaped) run(w *kWorker) {
	defer k.wg.Done()
	for {
		select {
		case <-k.stop:
			return
		case <-w.signal:
		}
		w.mu.Lock()
		p := w.pod
		w.mu.Unlock()
		_, _ = k.s.SyncPod(context.Background(), podworkers.UpdateSync, p)
		k.busy.Add(-1)
	}
}

func (k *kubeletShaped) idle() bool { return k.busy.Load() == 0 }
func (k *kubeletShaped) close()     { close(k.stop); k.wg.Wait() }

// BenchmarkUpdateAndWake sends each of N pods, round robin, one update and
// one wake per op, after all pods were created; goroutines/held is what
// the runner holds once idle.
func BenchmarkUpdateAndWake(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, impl := range []string{"podworkers", "kubelet-shaped"} {
			b.Run(fmt.Sprintf("%s/pods=%d", impl, n), func(b *testing.B) {
				s := &countSyncer{}
				before := runtime.NumGoroutine()
				var r podRunner
				if impl == "podworkers" {
					w, err := podworkers.New(s, podworkers.WithResyncInterval(0))
					if err != nil {
						b.Fatal(err)
					}
					r = ours{w}
				} else {
					r = newKubeletShaped(s)
				}
				pods := make([]*corev1.Pod, n)
				for i := range pods {
					pods[i] = pod(fmt.Sprint(i))
					r.update(pods[i])
				}
				for !r.idle() {
					runtime.Gosched()
				}
				held := runtime.NumGoroutine() - before
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					p := pods[i%n]
					r.update(p)
					r.wake(p.UID)
				}
				for !r.idle() {
					runtime.Gosched()
				}
				b.StopTimer()
				b.ReportMetric(float64(held), "goroutines/held")
				b.ReportMetric(float64(s.n.Load()-int64(n))/float64(b.N), "syncs/op")
				r.close()
			})
		}
	}
}
