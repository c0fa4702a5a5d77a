package pleg

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
)

// dirtyQueue holds the pods owed a PodSync, in the order of their first
// drop: a pod whose events keep being dropped goes to the back after each
// PodSync, so it cannot starve the others. Each operation is O(1).
type dirtyQueue struct {
	order []types.UID          // FIFO; each queued pod once
	drops map[types.UID]uint64 // queued pod → drops so far
}

func newDirtyQueue() dirtyQueue { return dirtyQueue{drops: map[types.UID]uint64{}} }

// add records a dropped event of uid.
func (q *dirtyQueue) add(uid types.UID) {
	if _, queued := q.drops[uid]; !queued {
		q.order = append(q.order, uid)
	}
	q.drops[uid]++
}

// next returns the pod at the front and its drop count.
func (q *dirtyQueue) next() (types.UID, uint64, bool) {
	if len(q.order) == 0 {
		return "", 0, false
	}
	uid := q.order[0]
	return uid, q.drops[uid], true
}

// delivered records that a PodSync for uid, taken from next with drops n,
// was delivered. A drop since then (the PodSync may have been read before
// it) owes another PodSync: the pod goes to the back.
func (q *dirtyQueue) delivered(uid types.UID, n uint64) {
	if len(q.order) == 0 || q.order[0] != uid {
		return // only resyncLoop takes from the front
	}
	q.order = q.order[1:]
	if q.drops[uid] == n {
		delete(q.drops, uid)
	} else {
		q.order = append(q.order, uid)
	}
	if len(q.order) == 0 {
		q.order = nil // let go of the drained array
	}
}

func (q *dirtyQueue) len() int { return len(q.order) }

// resyncLoop delivers one PodSync per pod whose event was dropped. It
// blocks on the channel (it is the only sender that does), so a PodSync is
// never dropped; several drops for one pod before delivery share one PodSync.
func (p *PLEG) resyncLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wakeResync:
		}
		for {
			p.mu.Lock()
			uid, n, ok := p.dirty.next()
			p.mu.Unlock()
			if !ok {
				break
			}
			select {
			case p.ch <- Event{ID: uid, Type: PodSync}:
			case <-ctx.Done():
				return
			}
			p.mu.Lock()
			p.stats.Delivered++
			p.stats.PodSyncs++
			p.dirty.delivered(uid, n)
			p.mu.Unlock()
		}
	}
}
