package pleg

import (
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
)

// outboxKind says what an outboxItem does.
type outboxKind uint8

const (
	outboxSet outboxKind = iota
	outboxDelete
	outboxUpdateTime
	outboxEvents
)

// outboxItem is one cache write or one batch of events. Items are decided
// under p.mu, where the records change, and carried out by flush after p.mu
// is released: the Cache is user code (a statecache subscriber runs inside
// Set) and may call back into the PLEG.
type outboxItem struct {
	kind   outboxKind
	uid    types.UID
	status *PodStatus
	err    error
	ts     time.Time
	events []Event
}

// queueLocked appends it to the outbox. The count lets a wait tell when
// everything decided before it was satisfied has been carried out.
func (p *PLEG) queueLocked(it outboxItem) {
	p.outbox = append(p.outbox, it)
	p.queued++
}

// setLocked queues cache.Set(uid, st, err, ts).
func (p *PLEG) setLocked(uid types.UID, st *PodStatus, err error, ts time.Time) {
	p.queueLocked(outboxItem{kind: outboxSet, uid: uid, status: st, err: err, ts: ts})
}

// deleteLocked queues cache.Delete(uid).
func (p *PLEG) deleteLocked(uid types.UID) {
	p.queueLocked(outboxItem{kind: outboxDelete, uid: uid})
}

// updateTimeLocked queues cache.UpdateTime(ts).
func (p *PLEG) updateTimeLocked(ts time.Time) {
	p.queueLocked(outboxItem{kind: outboxUpdateTime, ts: ts})
}

// publishLocked queues evs for delivery on the Watch channel, after the
// cache writes queued before them.
func (p *PLEG) publishLocked(evs []Event) {
	if len(evs) > 0 {
		p.queueLocked(outboxItem{kind: outboxEvents, events: evs})
	}
}

// flush carries out the queued items, in the order they were queued, and
// returns once every item queued before the call is done. Every goroutine
// that queues items calls it after releasing p.mu, before it reports its
// work done (stats, observer), so its cache writes and events are out when
// it returns.
//
// One flusher runs at a time (flushMu), so the cache sees the writes in the
// order the records changed, whichever goroutine decided them: a Delete
// decided after a Set is never undone by that Set, nor the reverse, and one
// pod's events are delivered in the order they were observed, each after the
// cache writes decided with or before it. The Cache is called without p.mu,
// so it may call RequestRelist, Healthy, Stats or Mode; flushMu is never
// taken while p.mu is held.
func (p *PLEG) flush() {
	p.flushOutbox()
	p.observe()
}

func (p *PLEG) flushOutbox() {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	var items []outboxItem
	for {
		done := uint64(len(items))
		clear(items) // do not keep statuses alive in the spare buffer
		p.mu.Lock()
		p.flushed += done
		items, p.outbox = p.outbox, items[:0]
		// Everything decided so far is in items or already carried out: a
		// wait satisfied now ends once items are done (next turn).
		p.wakeWaitersLocked()
		p.mu.Unlock()
		if len(items) == 0 {
			return
		}
		for i := range items {
			it := &items[i]
			switch it.kind {
			case outboxSet:
				p.cache.Set(it.uid, it.status, it.err, it.ts)
			case outboxDelete:
				p.cache.Delete(it.uid)
			case outboxUpdateTime:
				p.cache.UpdateTime(it.ts)
			case outboxEvents:
				p.mu.Lock()
				p.deliverLocked(it.events)
				p.mu.Unlock()
			}
		}
	}
}

// deliverLocked sends evs without blocking. An event that does not fit is
// counted and its pod is owed a PodSync (resyncLoop delivers it).
func (p *PLEG) deliverLocked(evs []Event) {
	if p.closed {
		return
	}
	for _, ev := range evs {
		if ev.Type == ContainerChanged && !p.cfg.changed {
			continue
		}
		p.fanOutLocked(ev)
		select {
		case p.ch <- ev:
			p.stats.Delivered++
			if ev.Type == PodSync {
				p.stats.PodSyncs++
			}
		default:
			p.stats.Dropped++
			p.dirty.add(ev.ID)
			signal(p.wakeResync)
			dropped := ev
			p.notes.post(Observation{Kind: ObservedDrop, Dropped: dropped})
			p.log.Warn("pleg event channel full; pod owed a PodSync", zap.String("pod", string(ev.ID)), zap.String("type", string(ev.Type)), zap.String("id", ev.Data))
		}
	}
}
