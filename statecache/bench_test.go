package statecache_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/syncpod/syncpod/statecache"
)

// podCache is what the benchmarks drive: the statecache.Cache and the
// kubelet-style baseline behind one interface.
type podCache interface {
	Get(key string) (*benchStatus, error)
	Set(key string, status *benchStatus, err error, timestamp time.Time) bool
	Delete(key string)
	UpdateTime(timestamp time.Time)
	GetNewerThan(ctx context.Context, key string, minTime time.Time) (*benchStatus, error)
}

type benchStatus struct {
	ID       string
	Modified time.Time
}

var (
	_ podCache = (*statecache.Cache[string, *benchStatus])(nil)
	_ podCache = (*kubeletCache)(nil)
)

// kubeletCache is a port of the kubelet's pod status cache
// (pkg/kubelet/container/cache.go, with the newer kubelet's refusal of older
// Sets): one RWMutex over all pods, per-pod subscriber lists, UpdateTime
// notifying every pod's subscribers. The one addition is a ctx in
// GetNewerThan so that benchmark goroutines can be stopped; like the
// kubelet, an abandoned subscription stays in the list until notified.
type kubeletCache struct {
	lock        sync.RWMutex
	pods        map[string]*kubeletData
	timestamp   *time.Time
	subscribers map[string][]*kubeletSubRecord
}

type kubeletData struct {
	status   *benchStatus
	err      error
	modified time.Time
}

type kubeletSubRecord struct {
	time time.Time
	ch   chan *kubeletData
}

func newKubeletCache() *kubeletCache {
	return &kubeletCache{pods: map[string]*kubeletData{}, subscribers: map[string][]*kubeletSubRecord{}}
}

func (c *kubeletCache) Get(id string) (*benchStatus, error) {
	c.lock.RLock()
	defer c.lock.RUnlock()
	d := c.get(id)
	return d.status, d.err
}

func (c *kubeletCache) GetNewerThan(ctx context.Context, id string, minTime time.Time) (*benchStatus, error) {
	ch := c.subscribe(id, minTime)
	select {
	case d := <-ch:
		return d.status, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *kubeletCache) Set(id string, status *benchStatus, err error, timestamp time.Time) bool {
	c.lock.Lock()
	defer c.lock.Unlock()
	if cached, ok := c.pods[id]; ok && cached.modified.After(timestamp) {
		return false
	}
	c.pods[id] = &kubeletData{status: status, err: err, modified: timestamp}
	c.notify(id, timestamp)
	return true
}

func (c *kubeletCache) Delete(id string) {
	c.lock.Lock()
	defer c.lock.Unlock()
	delete(c.pods, id)
}

func (c *kubeletCache) UpdateTime(timestamp time.Time) {
	c.lock.Lock()
	defer c.lock.Unlock()
	c.timestamp = &timestamp
	for id := range c.subscribers {
		c.notify(id, *c.timestamp)
	}
}

func (c *kubeletCache) get(id string) *kubeletData {
	d, ok := c.pods[id]
	if !ok {
		return &kubeletData{status: &benchStatus{ID: id}}
	}
	return d
}

func (c *kubeletCache) getIfNewerThan(id string, minTime time.Time) *kubeletData {
	d, ok := c.pods[id]
	globalTimestampIsNewer := c.timestamp != nil && c.timestamp.After(minTime)
	if !ok && globalTimestampIsNewer {
		return &kubeletData{status: &benchStatus{ID: id}}
	}
	if ok && (d.modified.After(minTime) || globalTimestampIsNewer) {
		return d
	}
	return nil
}

func (c *kubeletCache) notify(id string, timestamp time.Time) {
	list, ok := c.subscribers[id]
	if !ok {
		return
	}
	newList := []*kubeletSubRecord{}
	for i, r := range list {
		if timestamp.Before(r.time) {
			newList = append(newList, list[i])
			continue
		}
		r.ch <- c.get(id)
		close(r.ch)
	}
	if len(newList) == 0 {
		delete(c.subscribers, id)
	} else {
		c.subscribers[id] = newList
	}
}

func (c *kubeletCache) subscribe(id string, timestamp time.Time) chan *kubeletData {
	ch := make(chan *kubeletData, 1)
	c.lock.Lock()
	defer c.lock.Unlock()
	if d := c.getIfNewerThan(id, timestamp); d != nil {
		ch <- d
		return ch
	}
	c.subscribers[id] = append(c.subscribers[id], &kubeletSubRecord{time: timestamp, ch: ch})
	return ch
}

var cacheImpls = []struct {
	name string
	new  func() podCache
}{
	{"impl=kubelet", func() podCache { return newKubeletCache() }},
	{"impl=statecache", func() podCache { return statecache.New[string, *benchStatus]() }},
}

const benchPods = 1024

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "pod-" + strconv.Itoa(i)
	}
	return keys
}

func reportOpsPerSec(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkCacheMix runs Get/Set mixes over 1024 pods from all Ps at once
// (b.RunParallel). mix=readN means N Gets per 100 operations, the rest
// Sets with the current time (read once per 64 Sets, as a relister reads it
// once per relist).
func BenchmarkCacheMix(b *testing.B) {
	keys := benchKeys(benchPods)
	for _, mix := range []struct {
		name   string
		writes int // per 100 ops
	}{{"mix=read99", 1}, {"mix=read90", 10}, {"mix=read50", 50}} {
		for _, impl := range cacheImpls {
			b.Run(mix.name+"/"+impl.name, func(b *testing.B) {
				c := impl.new()
				now := time.Now()
				for _, k := range keys {
					c.Set(k, &benchStatus{ID: k, Modified: now}, nil, now)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					// Cheap per-goroutine PRNG (xorshift) so that key choice
					// costs nothing and shares no cache line.
					x := uint64(time.Now().UnixNano()) | 1
					var ts time.Time
					writes := 0
					for pb.Next() {
						x ^= x << 13
						x ^= x >> 7
						x ^= x << 17
						k := keys[x%benchPods]
						if int((x>>32)%100) < mix.writes {
							// A relister reads the clock once per relist,
							// not per pod: refresh every 64 Sets.
							if writes%64 == 0 {
								ts = time.Now()
							} else {
								ts = ts.Add(time.Nanosecond)
							}
							writes++
							c.Set(k, &benchStatus{ID: k, Modified: ts}, nil, ts)
						} else if st, _ := c.Get(k); st == nil {
							b.Error("missing pod")
						}
					}
				})
				reportOpsPerSec(b)
			})
		}
	}
}

// BenchmarkWakeOnSet: 1000 goroutines each wait in GetNewerThan on their own
// pod; an operation Sets one pod and waits until its waiter has woken and
// waits again. Both caches find the pod's subscribers by key here; the
// difference is the global lock each Set takes in the kubelet cache.
func BenchmarkWakeOnSet(b *testing.B) {
	const waiters = 1000
	keys := benchKeys(waiters)
	for _, impl := range cacheImpls {
		b.Run(impl.name+"/waiters=1000", func(b *testing.B) {
			c := impl.new()
			t0 := time.Unix(1_000_000, 0)
			ctx, cancel := context.WithCancel(context.Background())
			acks := make([]chan struct{}, waiters)
			armed := make(chan struct{}, waiters)
			var wg sync.WaitGroup
			for i, k := range keys {
				acks[i] = make(chan struct{}, 1)
				wg.Go(func() {
					minTime := t0
					armed <- struct{}{}
					for {
						st, err := c.GetNewerThan(ctx, k, minTime)
						if err != nil {
							return
						}
						minTime = st.Modified
						select {
						case acks[i] <- struct{}{}:
						case <-ctx.Done():
							return
						}
					}
				})
			}
			for range waiters {
				<-armed
			}
			b.ResetTimer()
			for n := range b.N {
				i := n % waiters
				ts := t0.Add(time.Duration(n+1) * time.Microsecond)
				c.Set(keys[i], &benchStatus{ID: keys[i], Modified: ts}, nil, ts)
				<-acks[i]
			}
			b.StopTimer()
			reportOpsPerSec(b)
			cancel()
			wg.Wait()
		})
	}
}

// BenchmarkWakeOnUpdateTime: 1000 goroutines wait in GetNewerThan for pods
// that have no entry, with distinct minTimes; each UpdateTime passes exactly
// one minTime. The kubelet cache walks all 1000 subscriber lists per call;
// statecache pops one waiter from its heap.
func BenchmarkWakeOnUpdateTime(b *testing.B) {
	for _, waiters := range []int{10, 1000} {
		keys := benchKeys(waiters)
		for _, impl := range cacheImpls {
			b.Run(fmt.Sprintf("%s/waiters=%d", impl.name, waiters), func(b *testing.B) {
				c := impl.new()
				t0 := time.Unix(1_000_000, 0)
				ctx, cancel := context.WithCancel(context.Background())
				acks := make(chan struct{}, 1)
				armed := make(chan struct{}, waiters)
				var wg sync.WaitGroup
				for i, k := range keys {
					wg.Go(func() {
						minTime := t0.Add(time.Duration(i) * time.Second)
						armed <- struct{}{}
						for {
							if _, err := c.GetNewerThan(ctx, k, minTime); err != nil {
								return
							}
							minTime = minTime.Add(time.Duration(waiters) * time.Second)
							select {
							case acks <- struct{}{}:
							case <-ctx.Done():
								return // the teardown's UpdateTime may wake several
							}
						}
					})
				}
				for range waiters {
					<-armed
				}
				b.ResetTimer()
				for n := range b.N {
					// Passes minTime t0+n s, the smallest one waiting.
					c.UpdateTime(t0.Add(time.Duration(n)*time.Second + time.Second/2))
					<-acks
				}
				b.StopTimer()
				reportOpsPerSec(b)
				cancel()
				// Wake any baseline waiters whose subscription outlives ctx.
				c.UpdateTime(t0.Add(time.Duration(b.N+2*waiters) * time.Second))
				wg.Wait()
			})
		}
	}
}
