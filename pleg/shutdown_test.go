package pleg

import (
	"errors"
	"testing"
)

// collectSub counts every event of sub until its channel closes.
func collectSub(sub *Subscription) *collector {
	c := &collector{counts: map[Event]int{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for e := range sub.Events() {
			c.mu.Lock()
			c.counts[e]++
			c.mu.Unlock()
		}
	}()
	return c
}

// The shutdown order of the package doc loses no event: stop the source of
// changes, wait until the PLEG has seen each last change, Close, and read
// Watch and every Subscription until they are closed. Every exit and every
// removal made before the shutdown is read exactly once from each.
func TestShutdownOrderLosesNothing(t *testing.T) {
	env, stop := eventedSim(t)
	defer stop()
	p := env.p
	sub, err := p.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	watched, subscribed := collect(p), collectSub(sub)

	pods := makePods(t, env.c, 4, 3)
	ctx := waitCtx(t)
	// The source of changes: every container exits, every other one is
	// removed, the last ones right before the shutdown.
	type target struct {
		sp      *simPod
		id      string
		removed bool
	}
	var targets []target
	for _, sp := range pods {
		for j, id := range sp.containers {
			if err := env.rt.ExitContainer(id, int32(j)); err != nil {
				t.Fatal(err)
			}
			tg := target{sp: sp, id: id, removed: j%2 == 0}
			if tg.removed {
				if err := env.c.RemoveContainer(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			targets = append(targets, tg)
		}
	}

	// 1. The source has stopped: nothing changes from here on.
	// 2. Wait until the PLEG has seen every last change.
	for _, tg := range targets {
		var err error
		if tg.removed {
			_, err = p.WaitContainerRemoved(ctx, tg.sp.uid, tg.id)
		} else {
			_, err = p.WaitContainerState(ctx, tg.sp.uid, tg.id, exited)
		}
		if err != nil {
			t.Fatalf("wait for %s: %v", tg.id, err)
		}
	}
	// 3. Close, 4. read every channel until it is closed.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	<-watched.done
	<-subscribed.done

	if err := sub.Err(); !errors.Is(err, ErrClosed) {
		t.Errorf("subscription ended with %v, want ErrClosed (not ErrOverflow)", err)
	}
	if st := p.Stats(); st.Dropped != 0 {
		t.Errorf("%d events dropped", st.Dropped)
	}
	for name, col := range map[string]*collector{"Watch": watched, "Subscription": subscribed} {
		for _, tg := range targets {
			if n := col.count(ev(tg.sp.uid, ContainerDied, tg.id)); n != 1 {
				t.Errorf("%s: ContainerDied %s read %d times, want 1", name, tg.id, n)
			}
			want := 0
			if tg.removed {
				want = 1
			}
			if n := col.count(ev(tg.sp.uid, ContainerRemoved, tg.id)); n != want {
				t.Errorf("%s: ContainerRemoved %s read %d times, want %d", name, tg.id, n, want)
			}
		}
	}
}
