package asyncpull

import "k8s.io/apimachinery/pkg/types"

// Stats is a snapshot of a Scheduler for a progress line or a metrics exporter: what is in
// progress now (gauges) and what happened since New (cumulative counters). All fields are read
// under the scheduler's lock, so they describe one instant: for example
// PullsStarted - Running - PullsSucceeded - PullsFailed is exactly the number of started pulls
// that ended cancelled.
//
// The counters never decrease, so a Prometheus exporter can publish them as counters as they
// are. PullsStarted, DedupeHits and Canceled count exactly the EventPullStarted, EventDedupe
// and EventCanceled events of WithObserver, so an exporter moving from events to Stats keeps
// its numbers.
type Stats struct {
	// Queued is the number of pulls waiting in the queue for a MaxParallel slot, a QPS token or
	// a per-registry or large-image limit.
	Queued int
	// Checking is the number of presence checks (ImageStatus, before deciding to pull) that
	// requests wait for. Their requests are answered StateQueued, like those of queued pulls.
	Checking int
	// Running is the number of PullImage calls in flight in the runtime, each holding a
	// MaxParallel slot. It includes calls cancelled because nobody waits any more that have
	// not returned yet.
	Running int
	// PodsWaiting is the number of distinct pods (Request.PodUID) with a request waiting for a
	// presence check, a queued pull or a running pull. Anonymous requests are not counted, nor
	// are pods that only wait for the end of a back-off (see ImagesInBackOff). Cancel removes
	// a pod at once; a request whose context is done stops counting shortly after.
	PodsWaiting int
	// ImagesInBackOff is the number of images in back-off now (on the scheduler's clock): an
	// earlier pull failed and no pull starts before the back-off ends. Back-off is kept per
	// image and credentials, so one image failing with two credentials counts twice.
	ImagesInBackOff int

	// PullsStarted counts PullImage calls (EventPullStarted).
	PullsStarted uint64
	// PullsSucceeded counts PullImage calls that returned an image, including one cancelled
	// too late to stop it.
	PullsSucceeded uint64
	// PullsFailed counts PullImage calls that returned an error, including timeouts
	// (WithPullTimeout), but not calls the scheduler cancelled because nobody waited any more
	// or it was closed. Most start a back-off (EventBackOff).
	PullsFailed uint64
	// DedupeHits counts requests that joined a presence check or pull already in progress
	// instead of starting one (EventDedupe). A pod asking again for a pull it already waits
	// for counts too: each such Ensure is a PullImage saved.
	DedupeHits uint64
	// Canceled counts presence checks and pulls, queued or running, dropped because no
	// request waited for them any more: contexts done or Cancel(podUID) (EventCanceled). Work
	// ended by Close is not counted.
	Canceled uint64
}

// counters holds the cumulative fields of Stats, under Scheduler.mu.
type counters struct {
	pullsStarted   uint64
	pullsSucceeded uint64
	pullsFailed    uint64
	dedupeHits     uint64
	canceled       uint64
}

// Stats returns a consistent snapshot of the scheduler. It takes the scheduler's lock once and
// makes no runtime call; its cost grows with the checks and pulls in progress and their
// waiters and with the images in back-off, not with history. It may be called after Close.
func (s *Scheduler) Stats() Stats {
	if s.images == nil {
		return Stats{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		Queued:         len(s.queue),
		Running:        len(s.runningOps),
		PullsStarted:   s.counts.pullsStarted,
		PullsSucceeded: s.counts.pullsSucceeded,
		PullsFailed:    s.counts.pullsFailed,
		DedupeHits:     s.counts.dedupeHits,
		Canceled:       s.counts.canceled,
	}
	// s.ops holds exactly the checks and pulls that requests can still join or wait for:
	// finished and abandoned ones are removed from it.
	var pods map[types.UID]struct{}
	for _, o := range s.ops {
		if o.phase == phaseInspect {
			st.Checking++
		}
		for w := range o.waiters {
			if w.pod == "" {
				continue
			}
			if pods == nil {
				pods = make(map[types.UID]struct{}, len(o.waiters))
			}
			pods[w.pod] = struct{}{}
		}
	}
	st.PodsWaiting = len(pods)
	now := s.cfg.clock.Now()
	for _, b := range s.backoff {
		if now.Before(b.until) {
			st.ImagesInBackOff++
		}
	}
	return st
}
