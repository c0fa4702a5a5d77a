package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/syncpod/syncpod/criclient/podcri"
)

// dataLink is the symlink in a written volume's directory that names the
// current version of its files: the user-visible names are symlinks
// through it, so swapping it changes every file at once (the kubelet's
// scheme for the volumes it writes).
const dataLink = "..data"

// filesDigest identifies a volume's payload.
func filesDigest(files []podcri.File) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%q %o %d\n", f.Path, f.Mode, len(f.Data))
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeAtomically makes dir hold exactly files, so that a reader sees the
// old set or the new one, never a mix: the files go to a new hidden
// directory, the ..data symlink is swapped to it with a rename, each
// top-level name is a symlink through ..data, and the names and the
// version no longer used are removed. When dir already holds files, it
// does nothing (so an adopting agent rewrites nothing).
func writeAtomically(dir string, files []podcri.File) error {
	if same, err := holds(dir, files); err == nil && same {
		return nil
	}
	version, err := os.MkdirTemp(dir, "..version.")
	if err != nil {
		return fmt.Errorf("write volume: %w", err)
	}
	top := map[string]bool{}
	for _, f := range files {
		path := filepath.Join(version, f.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("write volume: %w", err)
		}
		if err := os.WriteFile(path, f.Data, f.Mode); err != nil {
			return fmt.Errorf("write volume: %w", err)
		}
		if err := os.Chmod(path, f.Mode); err != nil {
			return fmt.Errorf("write volume: %w", err)
		}
		top[strings.SplitN(filepath.ToSlash(f.Path), "/", 2)[0]] = true
	}
	if err := os.Chmod(version, 0o755); err != nil {
		return fmt.Errorf("write volume: %w", err)
	}
	tmp := filepath.Join(dir, dataLink+"_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		return fmt.Errorf("write volume: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		return fmt.Errorf("write volume: %w", err)
	}
	for name := range top {
		link := filepath.Join(dir, name)
		target := filepath.Join(dataLink, name)
		if t, err := os.Readlink(link); err == nil && t == target {
			continue
		}
		_ = os.RemoveAll(link)
		if err := os.Symlink(target, link); err != nil {
			return fmt.Errorf("write volume: %w", err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("write volume: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		stale := !strings.HasPrefix(name, "..") && !top[name]
		oldVersion := strings.HasPrefix(name, "..version.") && name != filepath.Base(version)
		if stale || oldVersion {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("write volume: %w", err)
			}
		}
	}
	return nil
}

// holds reports whether dir's current version holds exactly files.
func holds(dir string, files []podcri.File) (bool, error) {
	current := filepath.Join(dir, dataLink)
	want := map[string]podcri.File{}
	for _, f := range files {
		want[filepath.ToSlash(f.Path)] = f
	}
	n := 0
	err := filepath.WalkDir(current+"/", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(current, path)
		f, ok := want[filepath.ToSlash(rel)]
		if !ok {
			return errDiffers
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if fi.Mode().Perm() != f.Mode || string(data) != string(f.Data) {
			return errDiffers
		}
		n++
		return nil
	})
	if errors.Is(err, errDiffers) || err != nil || n != len(files) {
		return false, err
	}
	for _, f := range files {
		name := strings.SplitN(filepath.ToSlash(f.Path), "/", 2)[0]
		if t, err := os.Readlink(filepath.Join(dir, name)); err != nil || t != filepath.Join(dataLink, name) {
			return false, nil
		}
	}
	return true, nil
}

var errDiffers = errors.New("differs")
