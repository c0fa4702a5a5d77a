package main

import "syscall"

// statFS returns the size and free space (for unprivileged users, as
// statfs' f_bavail) of dir's filesystem, and its inodes; zeros if it
// cannot be read.
func statFS(dir string) (capacity, available int64, inodes, inodesFree uint64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, 0, 0
	}
	bs := int64(st.Bsize)
	return int64(st.Blocks) * bs, int64(st.Bavail) * bs, st.Files, st.Ffree
}
