package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"
)

// Cleanup back-off between passes: a loaded runtime that timed a call
// out is given time, and a pass that removed everything ends at once.
const (
	cleanupRetryInitial = 200 * time.Millisecond
	cleanupRetryMax     = 5 * time.Second
)

// CleanupError is what Cleanup returns when ctx ended with pods of the
// agent still on the runtime.
type CleanupError struct {
	// Remaining names each pod (namespace/name) that still has a sandbox,
	// sorted; empty when no pass could list the sandboxes.
	Remaining []string
	// Dirs names the pod directories (Node.PodDir) that could not be
	// removed once every sandbox was.
	Dirs []string
	// Err is the last failure of a pass (a runtime error, or ctx's error).
	Err error
}

func (e *CleanupError) Error() string {
	if len(e.Remaining) == 0 && len(e.Dirs) > 0 {
		return fmt.Sprintf("agent: cleanup: %d pod directories remain (%s): %v", len(e.Dirs), strings.Join(e.Dirs, ", "), e.Err)
	}
	if len(e.Remaining) == 0 { // not even one pass listed the sandboxes
		return fmt.Sprintf("agent: cleanup: the runtime's sandboxes could not be listed, pods may remain: %v", e.Err)
	}
	return fmt.Sprintf("agent: cleanup: %d pods remain (%s): %v", len(e.Remaining), strings.Join(e.Remaining, ", "), e.Err)
}

func (e *CleanupError) Unwrap() error { return e.Err }

// Cleanup removes every sandbox the agent (or an earlier run of it) made,
// with their containers, and then every pod directory under Node.PodDir's
// directory (emptyDirs and all). Call it after Stop.
//
// A pass lists the agent's sandboxes and removes them, 8 at a time; when
// a call fails (a loaded runtime times StopPodSandbox out, say) Cleanup
// waits, doubling from 200 ms to 5 s, and passes again, until nothing of
// the agent is left (it returns nil) or ctx ends: then it returns a
// *CleanupError naming the pods that remain. Give ctx the deadline you can
// afford; without one Cleanup keeps trying while the runtime fails.
func (a *Agent) Cleanup(ctx context.Context) error {
	if ctx == nil {
		return errors.New("agent: Cleanup: ctx must not be nil")
	}
	delay := cleanupRetryInitial
	var remaining map[string]string // sandbox ID → namespace/name, as last listed
	var dirs []string               // pod directories left, once no sandbox is
	for {
		left, err := a.cleanupPass(ctx, remaining)
		if err == nil {
			if dirs, err = a.removePodDirs(nil); err == nil {
				return nil
			}
		}
		remaining = left
		if ctx.Err() != nil {
			ce := cleanupError(remaining, err)
			ce.Dirs = dirs
			return ce
		}
		a.log.Debug("cleanup: retrying", zap.Int("left", len(remaining)), zap.Duration("in", delay), zap.Error(err))
		t := a.clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			ce := cleanupError(remaining, err)
			ce.Dirs = dirs
			return ce
		case <-t.C():
		}
		delay = min(2*delay, cleanupRetryMax)
	}
}

func cleanupError(remaining map[string]string, last error) *CleanupError {
	names := map[string]bool{}
	for _, n := range remaining {
		names[n] = true
	}
	e := &CleanupError{Err: last}
	for n := range names {
		e.Remaining = append(e.Remaining, n)
	}
	sort.Strings(e.Remaining)
	return e
}

// removePodDirs removes the pod directories of every pod keep does not
// hold; it returns the directories it could not remove and why.
func (a *Agent) removePodDirs(keep func(types.UID) bool) ([]string, error) {
	uids, err := a.volumes.podDirs()
	if err != nil {
		return []string{a.volumes.dir}, err
	}
	var left []string
	var errs []error
	for _, uid := range uids {
		if keep != nil && keep(uid) {
			continue
		}
		if err := a.volumes.tearDown(uid); err != nil {
			left = append(left, a.volumes.podPath(uid))
			errs = append(errs, err)
		}
	}
	return left, errors.Join(errs...)
}

// cleanupPass lists the agent's sandboxes and removes each. It returns
// nil when nothing is left; otherwise the sandboxes that are left (the
// previous listing when the list itself failed) and why.
func (a *Agent) cleanupPass(ctx context.Context, previous map[string]string) (map[string]string, error) {
	sbs, err := a.runtime.sandboxes(ctx, map[string]string{managedLabel: "true"})
	if err != nil {
		return previous, fmt.Errorf("ListPodSandbox: %w", err)
	}
	left := map[string]string{}
	var mu sync.Mutex
	var errs []error
	var g errgroup.Group
	g.SetLimit(8) // pods are independent; the runtime bounds itself
	for _, sb := range sbs {
		g.Go(func() error {
			if err := a.removeSandbox(ctx, sb.Id); err != nil {
				mu.Lock()
				errs = append(errs, err)
				left[sb.Id] = sb.GetMetadata().GetNamespace() + "/" + sb.GetMetadata().GetName()
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	if len(errs) > 0 {
		return left, errors.Join(errs...)
	}
	return nil, nil
}
