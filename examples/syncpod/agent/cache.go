package agent

import (
	"context"
	"sync"
	"time"

	"github.com/syncpod/syncpod/statecache"
	"k8s.io/apimachinery/pkg/types"
)

// StatusStore is the pod-status cache the agent writes and its workers
// read, with the kubelet's semantics (GetNewerThan blocks until the entry
// or the global time is newer than minTime). A
// statecache.Cache[types.UID, *PodStatus] satisfies it.
type StatusStore interface {
	Get(key types.UID) (*PodStatus, error)
	Set(key types.UID, value *PodStatus, err error, timestamp time.Time) (updated bool)
	Delete(key types.UID)
	UpdateTime(timestamp time.Time)
	GetNewerThan(ctx context.Context, key types.UID, minTime time.Time) (*PodStatus, error)
}

var _ StatusStore = (*statecache.Cache[types.UID, *PodStatus])(nil)
var _ StatusStore = (*trackedStore)(nil)

// trackedStore counts the keys present, so the churn benchmark can show the
// cache returning to empty.
type trackedStore struct {
	StatusStore
	keys *keyCounter
}

func newStatusCache() *trackedStore {
	return &trackedStore{StatusStore: statecache.New[types.UID, *PodStatus](), keys: newKeyCounter()}
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

// Set implements StatusStore.
func (t *trackedStore) Set(key types.UID, value *PodStatus, err error, ts time.Time) bool {
	ok := t.StatusStore.Set(key, value, err, ts)
	if ok {
		t.keys.add(key)
	}
	return ok
}

// Delete implements StatusStore.
func (t *trackedStore) Delete(key types.UID) {
	t.StatusStore.Delete(key)
	t.keys.remove(key)
}

func (t *trackedStore) len() int { return t.keys.len() }
