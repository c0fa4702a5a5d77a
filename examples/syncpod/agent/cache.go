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
	mu   sync.Mutex
	keys map[types.UID]struct{}
}

func newStatusCache() *trackedStore {
	return &trackedStore{StatusStore: statecache.New[types.UID, *PodStatus](), keys: map[types.UID]struct{}{}}
}

// Set implements StatusStore.
func (t *trackedStore) Set(key types.UID, value *PodStatus, err error, ts time.Time) bool {
	ok := t.StatusStore.Set(key, value, err, ts)
	if ok {
		t.mu.Lock()
		t.keys[key] = struct{}{}
		t.mu.Unlock()
	}
	return ok
}

// Delete implements StatusStore.
func (t *trackedStore) Delete(key types.UID) {
	t.StatusStore.Delete(key)
	t.mu.Lock()
	delete(t.keys, key)
	t.mu.Unlock()
}

func (t *trackedStore) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}
