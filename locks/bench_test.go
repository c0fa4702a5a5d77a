package locks_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/keymutex"

	"github.com/syncpod/syncpod/locks"
)

// keyLocker is what the benchmark drives: KeyedMutex, Striped, one global
// mutex, and k8s.io/utils/keymutex's hashed mutex (what the kubelet uses,
// e.g. NewHashed(0): one mutex per CPU chosen by FNV hash).
type keyLocker interface {
	LockKey(key string)
	UnlockKey(key string) error
}

var (
	_ keyLocker = keyedAdapter{}
	_ keyLocker = stripedAdapter{}
	_ keyLocker = (*globalMutex)(nil)
	_ keyLocker = keymutex.NewHashed(0)
)

type keyedAdapter struct{ m *locks.KeyedMutex[string] }

func (a keyedAdapter) LockKey(key string) {
	if err := a.m.Lock(context.Background(), key); err != nil {
		panic(err)
	}
}
func (a keyedAdapter) UnlockKey(key string) error { return a.m.Unlock(key) }

type stripedAdapter struct{ s *locks.Striped[string] }

func (a stripedAdapter) LockKey(key string)         { a.s.Lock(key) }
func (a stripedAdapter) UnlockKey(key string) error { a.s.Unlock(key); return nil }

type globalMutex struct{ mu sync.Mutex }

func (g *globalMutex) LockKey(string)         { g.mu.Lock() }
func (g *globalMutex) UnlockKey(string) error { g.mu.Unlock(); return nil }

var lockImpls = []struct {
	name string
	new  func() keyLocker
}{
	{"impl=global", func() keyLocker { return &globalMutex{} }},
	{"impl=hashed-ncpu", func() keyLocker { return keymutex.NewHashed(0) }},
	{"impl=striped256", func() keyLocker { return stripedAdapter{locks.NewStriped[string](256)} }},
	{"impl=keyed", func() keyLocker { return keyedAdapter{locks.NewKeyedMutex[string]()} }},
}

var sink uint64

// holdWork simulates the work done while holding a pod's lock; n=0 measures
// the lock alone.
func holdWork(n int) uint64 {
	x := uint64(n) | 1
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// BenchmarkKeyedLock locks a random one of 128 pods (about a full node) from
// every P, does hold=N steps of work, and unlocks.
func BenchmarkKeyedLock(b *testing.B) {
	const pods = 128
	keys := make([]string, pods)
	for i := range keys {
		keys[i] = "pod-" + strconv.Itoa(i)
	}
	for _, hold := range []int{0, 200} {
		for _, impl := range lockImpls {
			b.Run("hold="+strconv.Itoa(hold)+"/"+impl.name, func(b *testing.B) {
				l := impl.new()
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					x := uint64(time.Now().UnixNano()) | 1
					var acc uint64
					for pb.Next() {
						x ^= x << 13
						x ^= x >> 7
						x ^= x << 17
						k := keys[x%pods]
						l.LockKey(k)
						acc += holdWork(hold)
						_ = l.UnlockKey(k)
					}
					mu.Lock()
					sink += acc
					mu.Unlock()
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
		}
	}
}

var mu sync.Mutex

// BenchmarkKeyedLockIO holds each pod's lock across a simulated 50µs CRI
// call (a sleep, off-CPU), with 16 goroutines per P over 128 pods: the
// kubelet case, where a pod worker keeps its pod locked while it waits for
// the runtime. Throughput then depends on how many pods can be worked on at
// once: one for a global mutex, about the number of CPUs for the hashed
// keymutex, every distinct pod for KeyedMutex.
func BenchmarkKeyedLockIO(b *testing.B) {
	const pods = 128
	keys := make([]string, pods)
	for i := range keys {
		keys[i] = "pod-" + strconv.Itoa(i)
	}
	for _, impl := range lockImpls {
		b.Run(impl.name, func(b *testing.B) {
			l := impl.new()
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				x := uint64(time.Now().UnixNano()) | 1
				for pb.Next() {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					k := keys[x%pods]
					l.LockKey(k)
					time.Sleep(50 * time.Microsecond)
					_ = l.UnlockKey(k)
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkSnapshotLoad reads a copy-on-write snapshot against an RWMutex
// guarded value, from every P.
func BenchmarkSnapshotLoad(b *testing.B) {
	b.Run("impl=rwmutex", func(b *testing.B) {
		var rw sync.RWMutex
		v := map[string]int{"a": 1}
		b.RunParallel(func(pb *testing.PB) {
			n := 0
			for pb.Next() {
				rw.RLock()
				n += v["a"]
				rw.RUnlock()
			}
			_ = n
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
	b.Run("impl=snapshot", func(b *testing.B) {
		s := locks.NewSnapshot(map[string]int{"a": 1})
		b.RunParallel(func(pb *testing.PB) {
			n := 0
			for pb.Next() {
				n += s.Load()["a"]
			}
			_ = n
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
}
