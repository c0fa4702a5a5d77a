package manifest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/examples/syncpod/agent"
)

// DefaultDebounce is how long a manifest directory must be quiet before it
// is re-read: editors write a file in several steps.
const DefaultDebounce = 100 * time.Millisecond

// Dir turns a directory of pod manifests into pod updates, like the
// kubelet's static pod source: adding, changing or deleting a file creates,
// updates or kills its pods. Files ending .yaml, .yml or .json are read;
// hidden files and editor temporaries are ignored.
type Dir struct {
	dir      string
	clock    clock.WithTickerAndDelayedExecution
	debounce time.Duration
	log      *zap.Logger
	apply    func(agent.PodUpdate)
	onError  func(error)

	// syncMu serialises Syncs (Run's and direct calls): each reads and
	// replaces current, and their updates must reach apply in the order
	// they were computed, one Sync's batch at a time.
	syncMu  sync.Mutex
	current map[string]*podSource // by namespace/name; guarded by syncMu
}

type podSource struct {
	pod  *corev1.Pod
	file string
}

// Option configures a Dir.
type Option func(*Dir)

// WithDebounce sets the quiet period before a re-read (default DefaultDebounce).
func WithDebounce(d time.Duration) Option { return func(m *Dir) { m.debounce = d } }

// WithClock injects the clock used for debouncing.
func WithClock(c clock.WithTickerAndDelayedExecution) Option {
	return func(m *Dir) { m.clock = c }
}

// WithLogger sets the logger.
func WithLogger(l *zap.Logger) Option { return func(m *Dir) { m.log = l } }

// WithErrors receives every manifest error (a *Error or a
// watch error); by default they are logged.
func WithErrors(f func(error)) Option { return func(m *Dir) { m.onError = f } }

// NewDir returns a source for dir that calls apply for every change.
func NewDir(dir string, apply func(agent.PodUpdate), opts ...Option) *Dir {
	m := &Dir{dir: dir, clock: clock.RealClock{}, debounce: DefaultDebounce, log: zap.NewNop(),
		apply: apply, current: map[string]*podSource{}}
	for _, o := range opts {
		o(m)
	}
	if m.onError == nil {
		m.onError = func(err error) { m.log.Error("manifest", zap.Error(err)) }
	}
	return m
}

func manifestFile(name string) bool {
	base := filepath.Base(name)
	if strings.HasPrefix(base, ".") || strings.HasSuffix(base, "~") {
		return false
	}
	switch strings.ToLower(filepath.Ext(base)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Sync reads the directory once and applies the differences to what it
// applied before. A file with errors keeps the pods it had provided that it
// no longer yields validly (a half-written edit does not kill a pod); a
// deleted file's pods are deleted.
//
// Sync may be called at any time, also while Run is running: calls are
// serialised, so apply and the error callback are never called
// concurrently and see every update once, in order. They are called
// inside that serialisation and must not call Sync themselves.
func (m *Dir) Sync() error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		return fmt.Errorf("read manifest dir %s: %w", m.dir, err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && manifestFile(e.Name()) {
			files = append(files, filepath.Join(m.dir, e.Name()))
		}
	}
	sort.Strings(files)
	next := map[string]*podSource{}
	badFiles := map[string]bool{}
	for _, f := range files {
		pods, err := LoadFile(f)
		if err != nil {
			badFiles[f] = true
			for _, e := range flatten(err) {
				m.onError(e)
			}
		}
		for _, p := range pods {
			key := podKey(p)
			if prev, dup := next[key]; dup {
				m.onError(&Error{File: f, Doc: -1, Pod: key, Field: "metadata.name",
					Err: fmt.Errorf("pod already defined in %s", prev.file)})
				continue
			}
			next[key] = &podSource{pod: p, file: f}
		}
	}
	for key, old := range m.current {
		if _, ok := next[key]; !ok && badFiles[old.file] {
			next[key] = old // keep it until the file is valid again
		}
	}
	var updates []agent.PodUpdate
	for key, cur := range next {
		old, ok := m.current[key]
		switch {
		case !ok:
			updates = append(updates, agent.PodUpdate{Op: agent.OpAdd, Pod: cur.pod, Source: cur.file})
		case !reflect.DeepEqual(old.pod.Spec, cur.pod.Spec) || !reflect.DeepEqual(old.pod.Annotations, cur.pod.Annotations) ||
			!reflect.DeepEqual(old.pod.Labels, cur.pod.Labels):
			updates = append(updates, agent.PodUpdate{Op: agent.OpUpdate, Pod: cur.pod, Source: cur.file})
		default:
			next[key] = old
		}
	}
	for key, old := range m.current {
		if _, ok := next[key]; !ok {
			updates = append(updates, agent.PodUpdate{Op: agent.OpDelete, Pod: old.pod, Source: old.file})
		}
	}
	m.current = next
	sort.Slice(updates, func(i, j int) bool { return podKey(updates[i].Pod) < podKey(updates[j].Pod) })
	for _, u := range updates {
		m.apply(u)
	}
	return nil
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// Run reads the directory, then watches it until ctx is done, re-reading
// after each burst of changes. It returns nil when ctx is done.
func (m *Dir) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch manifest dir: %w", err)
	}
	defer w.Close()
	if err := w.Add(m.dir); err != nil {
		return fmt.Errorf("watch manifest dir %s: %w", m.dir, err)
	}
	if err := m.Sync(); err != nil {
		return err
	}
	var timer clock.Timer
	var fire <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("watch manifest dir: watcher closed")
			}
			if !manifestFile(ev.Name) {
				continue
			}
			if timer != nil {
				timer.Stop()
			}
			timer = m.clock.NewTimer(m.debounce)
			fire = timer.C()
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("watch manifest dir: watcher closed")
			}
			m.onError(fmt.Errorf("watch manifest dir %s: %w", m.dir, err))
		case <-fire:
			fire = nil
			if err := m.Sync(); err != nil {
				m.onError(err)
			}
		}
	}
}
