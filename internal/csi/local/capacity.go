package local

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// fsStats is what statfs says of a filesystem.
type fsStats struct {
	totalBytes, availableBytes, usedBytes int64
	totalInodes, freeInodes, usedInodes   int64
}

func statfs(path string) (fsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsStats{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := st.Bsize
	return fsStats{
		totalBytes:     int64(st.Blocks) * bs,
		availableBytes: int64(st.Bavail) * bs,
		usedBytes:      int64(st.Blocks-st.Bfree) * bs,
		totalInodes:    int64(st.Files),
		freeInodes:     int64(st.Ffree),
		usedInodes:     int64(st.Files - st.Ffree),
	}, nil
}
