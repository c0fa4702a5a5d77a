package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"
)

// mountTmpfs mounts a tmpfs on dir (a medium Memory emptyDir) unless one
// is there already (an adopted pod's), of size bytes when size is set
// (else the kernel's default, half the memory). It needs root.
func mountTmpfs(dir string, size *resource.Quantity) error {
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("emptyDir medium Memory needs a tmpfs mount, which needs root")
	}
	opts := "mode=0777"
	if size != nil && size.Value() > 0 {
		opts += ",size=" + strconv.FormatInt(size.Value(), 10)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

func unmount(dir string) error {
	err := syscall.Unmount(dir, 0)
	if errors.Is(err, syscall.EBUSY) {
		err = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

func device(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return 0, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	return uint64(st.Dev), nil
}

// isMountPoint reports whether dir is on another filesystem than its
// parent.
func isMountPoint(dir string) (bool, error) {
	d, err := device(dir)
	if err != nil {
		return false, err
	}
	p, err := device(filepath.Dir(dir))
	if err != nil {
		return false, err
	}
	return d != p, nil
}

// checkNoMounts fails when a directory under dir is on another
// filesystem than dir.
func checkNoMounts(dir string) error {
	root, err := device(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if dev, err := device(path); err != nil {
			return err
		} else if dev != root {
			return fmt.Errorf("%s is still mounted: not removing %s", path, dir)
		}
		return nil
	})
}
