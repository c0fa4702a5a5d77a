package agent

import (
	"context"
	"sync"
	"time"

	"github.com/syncpod/syncpod/statecache"
	"k8s.io/apimachinery/pkg/types"
)

// statusStore is the pod-status cache the agent writes and its workers
// read, with the kubelet's semantics (GetNewerThan blocks until the entry
// or the global time is newer than minTime). A
// statecache.Cache[types.UID, *runtimePodStatus] satisfies it.
type statusStore interface {
	Get(key types.UID) (*runtimePodStatus, error)                                                  // the stored status, nil if none
	Set(key types.UID, value *runtimePodStatus, err error, timestamp time.Time) (updated bool)     // refused if older than the stored one
	Delete(key types.UID)                                                                          // forget the pod
	UpdateTime(timestamp time.Time)                                                                // every entry is at least this fresh
	GetNewerThan(ctx context.Context, key types.UID, minTime time.Time) (*runtimePodStatus, error) // blocks until newer than minTime
}

var _ statusStore = (*statecache.Cache[types.UID, *runtimePodStatus])(nil)
var _ statusStore = (*trackedStore)(nil)

// trackedStore counts the keys present, so the churn benchmark can show the
// cache returning to empty. With trackReads it also keeps active exact
// across GetNewerThan: a read that has to wait stops counting as work, and
// counts again from the moment the write that satisfies it is made (by the
// writer, which is itself counted), not from when the reader next runs.
type trackedStore struct {
	statusStore
	keys *keyCounter

	mu       sync.Mutex // held across each write when reads are tracked
	active   *activity  // nil: reads are not tracked
	modified map[types.UID]time.Time
	global   time.Time // UpdateTime's time; zero until the first
	parked   map[*parkedRead]struct{}
}

// parkedRead is one GetNewerThan waiting for a write.
type parkedRead struct {
	key     types.UID
	minTime time.Time
	woken   bool // counted in active again
}

func newStatusCache() *trackedStore {
	return &trackedStore{statusStore: statecache.New[types.UID, *runtimePodStatus](), keys: newKeyCounter()}
}

// keyCounter is the set of keys a cache holds.
type keyCounter struct {
	mu   sync.Mutex
	keys map[types.UID]struct{}
}

func newKeyCounter() *keyCounter { return &keyCounter{keys: map[types.UID]struct{}{}} }

func (k *keyCounter) add(key types.UID) {
	k.mu.Lock()
	k.keys[key] = struct{}{}
	k.mu.Unlock()
}

func (k *keyCounter) remove(key types.UID) {
	k.mu.Lock()
	delete(k.keys, key)
	k.mu.Unlock()
}

func (k *keyCounter) len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.keys)
}

// trackReads makes GetNewerThan calls that wait count out of a, and back
// in when satisfied. Call it before the store is used.
func (t *trackedStore) trackReads(a *activity) {
	t.active = a
	t.modified = map[types.UID]time.Time{}
	t.parked = map[*parkedRead]struct{}{}
}

// freshLocked mirrors statecache's rule: the entry or the global time is
// strictly after minTime.
func (t *trackedStore) freshLocked(key types.UID, minTime time.Time) bool {
	if m, ok := t.modified[key]; ok && m.After(minTime) {
		return true
	}
	return !t.global.IsZero() && t.global.After(minTime)
}

func (t *trackedStore) wakeLocked() {
	for r := range t.parked {
		if !r.woken && t.freshLocked(r.key, r.minTime) {
			r.woken = true
			t.active.add(1)
		}
	}
}

// Set implements statusStore.
func (t *trackedStore) Set(key types.UID, value *runtimePodStatus, err error, ts time.Time) bool {
	if t.active != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
	}
	ok := t.statusStore.Set(key, value, err, ts)
	if ok {
		t.keys.add(key)
		if t.active != nil {
			if m, had := t.modified[key]; !had || !ts.Before(m) {
				t.modified[key] = ts
			}
			t.wakeLocked()
		}
	}
	return ok
}

// Delete implements statusStore.
func (t *trackedStore) Delete(key types.UID) {
	if t.active != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.modified, key)
	}
	t.statusStore.Delete(key)
	t.keys.remove(key)
}

// UpdateTime implements statusStore.
func (t *trackedStore) UpdateTime(ts time.Time) {
	if t.active == nil {
		t.statusStore.UpdateTime(ts)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.statusStore.UpdateTime(ts)
	if ts.After(t.global) {
		t.global = ts
	}
	t.wakeLocked()
}

// GetNewerThan implements statusStore.
func (t *trackedStore) GetNewerThan(ctx context.Context, key types.UID, minTime time.Time) (*runtimePodStatus, error) {
	if t.active == nil {
		return t.statusStore.GetNewerThan(ctx, key, minTime)
	}
	t.mu.Lock()
	if t.freshLocked(key, minTime) {
		t.mu.Unlock()
		return t.statusStore.GetNewerThan(ctx, key, minTime)
	}
	r := &parkedRead{key: key, minTime: minTime}
	t.parked[r] = struct{}{}
	t.active.add(-1)
	t.mu.Unlock()
	st, err := t.statusStore.GetNewerThan(ctx, key, minTime)
	t.mu.Lock()
	delete(t.parked, r)
	if !r.woken { // ctx ended first
		t.active.add(1)
	}
	t.mu.Unlock()
	return st, err
}

func (t *trackedStore) len() int { return t.keys.len() }
