package pleg

// Subscription is one reader's copy of the events delivered on Watch, with
// its own bounded buffer. A reader that falls behind is not waited for: the
// subscription ends with ErrOverflow at the first event that does not fit,
// so its reader knows it missed something (re-read the cache and
// resubscribe). Subscriptions get no PodSync events: they end instead.
type Subscription struct {
	p   *PLEG
	ch  chan Event
	err error // guarded by p.mu
}

// Subscribe returns a subscription to the events delivered from now on,
// buffering up to buffer events (0: DefaultChannelCapacity). A negative
// buffer is an *ArgError; after Close it fails with ErrClosed.
func (p *PLEG) Subscribe(buffer int) (*Subscription, error) {
	if buffer < 0 {
		return nil, &ArgError{Method: "Subscribe", Arg: "buffer", Reason: "must not be negative"}
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

// Events returns the subscription's events; it is closed when the
// subscription ends.
func (s *Subscription) Events() <-chan Event { return s.ch }

// Err says why the subscription ended: nil while it runs or after its
// Close, ErrOverflow when its reader fell behind, ErrClosed when the PLEG
// closed.
func (s *Subscription) Err() error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return s.err
}

// Close ends the subscription. It is idempotent and returns nil.
func (s *Subscription) Close() error {
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
