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
)

// storeLock is a context-aware group lock with FIFO fairness between groups:
// a waiter is admitted only when it is at the head of the queue and the
// holders (if any) are of its group. It models containerd's metadata store,
// where Lists wait for the writes in flight when they arrive, without
// serialising the writes against each other.
type storeLock struct {
	mu      sync.Mutex
	holders int
	group   lockGroup
	queue   []*storeWaiter
}

type storeWaiter struct {
	group lockGroup
	ready chan struct{}
}

// acquire blocks until g holds the store or ctx ends.
func (l *storeLock) acquire(ctx context.Context, g lockGroup) error {
	l.mu.Lock()
	if len(l.queue) == 0 && (l.holders == 0 || l.group == g) {
		l.holders++
		l.group = g
		l.mu.Unlock()
		return nil
	}
	w := &storeWaiter{group: g, ready: make(chan struct{})}
	l.queue = append(l.queue, w)
	l.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	select {
	case <-w.ready:
		// Granted while we were giving up: hand the slot back.
		l.holders--
	default:
		for i, q := range l.queue {
			if q == w {
				l.queue = append(l.queue[:i], l.queue[i+1:]...)
				break
			}
		}
	}
	l.grantLocked()
	l.mu.Unlock()
	return ctx.Err()
}

// release gives up one hold taken by acquire.
func (l *storeLock) release() {
	l.mu.Lock()
	l.holders--
	l.grantLocked()
	l.mu.Unlock()
}

func (l *storeLock) grantLocked() {
	for len(l.queue) > 0 {
		w := l.queue[0]
		if l.holders > 0 && l.group != w.group {
			return
		}
		l.holders++
		l.group = w.group
		l.queue = l.queue[1:]
		close(w.ready)
	}
}
