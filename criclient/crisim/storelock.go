package crisim

import (
	"context"
	"sync"
)

// lockGroup is a class of store users: members of one group share the store,
// members of different groups exclude each other.
type lockGroup int

const (
	groupMutation lockGroup = iota
	groupList
	numGroups
)

func (g lockGroup) other() lockGroup { return 1 - g }

// storeLock is a context-aware, phase-fair group lock. Members of the
// holding group are admitted at once unless the other group is waiting;
// when the last holder leaves, every waiter of the other group is admitted
// together. So a List waits only for the mutations in flight when it
// arrived, and a mutation arriving behind a waiting List waits only for that
// batch of Lists — neither group can starve the other. It models
// containerd's metadata store, where Lists queue behind in-flight writes,
// without serialising the writes against each other.
type storeLock struct {
	mu      sync.Mutex
	holders int
	group   lockGroup
	waiting [numGroups][]*storeWaiter
}

type storeWaiter struct {
	ready chan struct{}
}

// acquire blocks until g holds the store or ctx ends.
func (l *storeLock) acquire(ctx context.Context, g lockGroup) error {
	l.mu.Lock()
	if len(l.waiting[g.other()]) == 0 && (l.holders == 0 || l.group == g) {
		l.holders++
		l.group = g
		l.mu.Unlock()
		return nil
	}
	w := &storeWaiter{ready: make(chan struct{})}
	l.waiting[g] = append(l.waiting[g], w)
	l.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-w.ready:
		// Granted while we were giving up: hand the hold back.
		l.holders--
	default:
		q := l.waiting[g]
		for i, x := range q {
			if x == w {
				l.waiting[g] = append(q[:i:i], q[i+1:]...)
				break
			}
		}
	}
	l.switchLocked()
	return ctx.Err()
}

// release gives up one hold taken by acquire.
func (l *storeLock) release() {
	l.mu.Lock()
	l.holders--
	l.switchLocked()
	l.mu.Unlock()
}

// switchLocked admits a whole waiting group once the store is free,
// preferring the group that did not hold it last.
func (l *storeLock) switchLocked() {
	if l.holders > 0 {
		// Waiters of the holding group were queued only to let the other
		// group go first; if it gave up, they may join now.
		if q := l.waiting[l.group]; len(q) > 0 && len(l.waiting[l.group.other()]) == 0 {
			l.holders += len(q)
			l.waiting[l.group] = nil
			for _, w := range q {
				close(w.ready)
			}
		}
		return
	}
	for _, g := range []lockGroup{l.group.other(), l.group} {
		if q := l.waiting[g]; len(q) > 0 {
			l.group = g
			l.holders = len(q)
			l.waiting[g] = nil
			for _, w := range q {
				close(w.ready)
			}
			return
		}
	}
}
