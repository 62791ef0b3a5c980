package main

import (
	"io/fs"
	"path/filepath"
	"syscall"
)

// diskUsage is the space the files under dir take on disk (st_blocks),
// each inode counted once: a checkpoint's hard links to the files it
// captured cost nothing more.
func diskUsage(dir string) (int64, error) {
	seen := map[uint64]bool{}
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && !seen[st.Ino] {
			seen[st.Ino] = true
			n += st.Blocks * 512
		}
		return nil
	})
	return n, err
}
