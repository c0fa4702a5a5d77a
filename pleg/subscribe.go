package pleg

// Subscription is one reader's copy of the events delivered on Watch, with
// its own bounded buffer. A reader that falls behind is not waited for: the
// subscription ends with ErrOverflow at the first event that does not fit,
// so its reader knows it missed something (re-read the cache and
// resubscribe). Subscriptions get no PodSync events: they end instead.
//
// Make one with PLEG.Subscribe. A Subscription not made by it (its zero
// value, a nil pointer) has ended before it began: Events returns a closed
// channel, Err an *ArgError saying to use Subscribe, and Close does nothing.
type Subscription struct {
	p   *PLEG
	ch  chan Event
	err error // guarded by p.mu
}

// closedEvents is the channel of what has nothing to deliver: a PLEG or a
// Subscription not made by New or Subscribe. Reading it never blocks.
var closedEvents = func() chan Event {
	ch := make(chan Event)
	close(ch)
	return ch
}()

// Subscribe returns a subscription to the events delivered from now on,
// buffering up to buffer events (0: DefaultChannelCapacity). A negative
// buffer, one above MaxChannelCapacity, or a PLEG not made by New is an
// *ArgError; after Close it fails with ErrClosed.
//
// Events already delivered stay in the buffer when the subscription ends:
// after Close (Err is ErrClosed) its reader still reads them, then finds
// Events closed.
func (p *PLEG) Subscribe(buffer int) (*Subscription, error) {
	if !p.made() {
		return nil, errNotNew("Subscribe")
	}
	if buffer < 0 {
		return nil, &ArgError{Method: "Subscribe", Arg: "buffer", Reason: "must not be negative"}
	}
	if buffer > MaxChannelCapacity {
		return nil, &ArgError{Method: "Subscribe", Arg: "buffer", Reason: "must be at most MaxChannelCapacity"}
	}
	if buffer == 0 {
		buffer = DefaultChannelCapacity
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil, ErrClosed
	}
	s := &Subscription{p: p, ch: make(chan Event, buffer)}
	p.subs[s] = struct{}{}
	return s, nil
}

func (s *Subscription) made() bool { return s != nil && s.p != nil }

// Events returns the subscription's events; it is closed when the
// subscription ends.
func (s *Subscription) Events() <-chan Event {
	if !s.made() {
		return closedEvents
	}
	return s.ch
}

// Err says why the subscription ended: nil while it runs or after its
// Close, ErrOverflow when its reader fell behind, ErrClosed when the PLEG
// closed, an *ArgError for a Subscription not made by Subscribe.
func (s *Subscription) Err() error {
	if !s.made() {
		return &ArgError{Method: "Subscription.Err", Arg: "Subscription", Reason: "is not initialized: use PLEG.Subscribe"}
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return s.err
}

// Close ends the subscription. It is idempotent and returns nil.
func (s *Subscription) Close() error {
	if !s.made() {
		return nil
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.endLocked(s, nil)
	return nil
}

func (p *PLEG) endLocked(s *Subscription, err error) {
	if _, ok := p.subs[s]; !ok {
		return
	}
	delete(p.subs, s)
	s.err = err
	close(s.ch)
}

// fanOutLocked hands ev to every subscription, ending those that are full.
func (p *PLEG) fanOutLocked(ev Event) {
	for s := range p.subs {
		select {
		case s.ch <- ev:
		default:
			p.endLocked(s, ErrOverflow)
		}
	}
}
